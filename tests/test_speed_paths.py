"""The fast paths: what the one-file check imports, fixes that apply are the ones marked
fixable, and each fix's JSON edits (one libcst parse per file) are that fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import _fix_applies, lint_source
from xlalint.engine.reporters import finding_to_json, render, text_line
from xlalint.fixers.apply import apply_fixes, file_edits
from xlalint.model import Finding, Fix, InsertStatement, ReplaceExpr, Span, split_lines

FIXTURES = Path(__file__).parent / "fixtures"
CHAIN = """\
import torch

model = torch.nn.Linear(2, 2)


def main():
    x = (
        torch.randn(2, 2)
        .float()
        .cuda(0)
    )
    y = (model
         .half()
         .cuda())
    return x, y
"""


def apply_edits(source: str, edits) -> str:
    starts = [0]
    for line in split_lines(source, keepends=True):
        starts.append(starts[-1] + len(line))
    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        start = starts[edit.start[0] - 1] + edit.start[1] - 1
        end = starts[edit.end[0] - 1] + edit.end[1] - 1
        source = source[:start] + edit.content + source[end:]
    return source


def test_cuda_at_the_end_of_a_multiline_chain_is_fixed():
    findings = lint_source(CHAIN, "chain.py")
    assert [f.code for f in findings] == ["XLA104", "XLA104"]
    assert all(f.fix is not None for f in findings)
    result = fix_source(CHAIN, "chain.py")
    assert len(result.applied) == 2 and result.error is None
    assert ".float().to(torch_xla.device())\n    )" in result.source
    assert ".half().to(torch_xla.device()))" in result.source
    compile(result.source, "fixed.py", "exec")
    assert fix_source(result.source, "chain.py").source == result.source
    for item in json.loads(render("json", findings, sources={"chain.py": CHAIN})):
        assert item["fix"]["edits"], item
        edits = file_edits(CHAIN, [f.fix for f in findings])
        assert all(edits.values())


def test_a_fix_that_does_not_apply_is_reported_as_none():
    # A target that names no expression of the file: the applier cannot find it.
    fix = Fix("safe", "test", (ReplaceExpr(Span(40, 0, 40, 4), "y"),))
    finding = Finding("XLA104", "cuda-device", "m", "a.py", Span(1, 0, 1, 1), fix)
    source = "import torch\nx = 1\n"
    assert finding_to_json(finding, {"a.py": source})["fix"] is None
    sarif = json.loads(render("sarif", [finding], sources={"a.py": source}))
    assert "fixes" not in sarif["runs"][0]["results"][0]
    # ... and the check path, which has no libcst, knows it too: no `[*]`.
    assert not _fix_applies(fix, split_lines(source))


@pytest.mark.parametrize(
    ("operation", "applies"),
    [
        (ReplaceExpr(Span(2, 4, 2, 5), "{x}.to(d)", (("x", Span(2, 4, 2, 5)),)), True),
        (ReplaceExpr(Span(2, 4, 2, 5), "{x}.to(", (("x", Span(2, 4, 2, 5)),)), False),
        (InsertStatement(Span(2, 0, 2, 5), "xm.mark_step()"), True),
        (InsertStatement(Span(2, 0, 2, 5), "xm.mark_step("), False),
        (ReplaceExpr(Span(9, 0, 9, 1), "y"), False),
    ],
)
def test_the_check_path_marks_only_fixes_that_apply(operation, applies):
    source = "import torch\nx = t\n"
    fix = Fix("safe", "test", (operation,))
    assert _fix_applies(fix, split_lines(source)) is applies
    finding = Finding("XLA104", "cuda-device", "m", "a.py", Span(2, 0, 2, 1), fix)
    assert ("[*]" in text_line(finding)) is (finding.fix is not None)


def fixture_sources() -> list[Path]:
    return [p for p in sorted(FIXTURES.glob("XLA*/*.py")) if not p.name.endswith((".fixed.py", ".unsafe.py"))]


@pytest.mark.parametrize("path", fixture_sources(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_fixs_edits_from_one_parse_are_that_fix_alone(path):
    source = path.read_text()
    fixes = [f.fix for f in lint_source(source, str(path), Settings()) if f.fix is not None]
    edits = file_edits(source, fixes)
    for fix in fixes:
        expected, applied = apply_fixes(source, [fix])
        assert applied, fix
        assert edits[fix], fix
        assert apply_edits(source, edits[fix]) == expected


# What the one-file check (pre-commit's and an editor's run) must not import: each costs
# start-up time and none is used to check one file. A plain check is read by the entry
# point itself (``cli.plain_check``): typer, its click and what they import (platform,
# subprocess, uuid, shellingham), the app and its help come only with another command.
NOT_ON_THE_CHECK_PATH = (
    "typer",
    "click",
    "shellingham",
    "platform",
    "subprocess",
    "uuid",
    "xlalint.cli_app",
    "xlalint.help_format",
    "xlalint.harness",  # `run`'s command is registered with the app
    "torch",
    "torch_xla",
    "transformers",
    "libcst",
    "pydantic",
    "pathspec",
    "rich",  # the full output format only
    "pygls",
    "lsprotocol",
    "xml.sax",
    "concurrent.futures",  # the process pool: more than one file
    "multiprocessing",
    "urllib.request",
    "http",
    "email",
    "xlalint.fixers",
    "xlalint.server",
    "xlalint.harness.runner",
    "xlalint.harness.session",
    "xlalint.harness.prepare",
    "xlalint.engine.fixing",  # fix and --diff
    "xlalint.engine.fix_output",
    "xlalint.engine.fix_guard",
    "xlalint.engine.notebook",  # a notebook
    "xlalint.engine.notebook_json",
    "xlalint.engine.full_format",
    "xlalint.engine.gitignore",  # a walk of a folder
)


def test_one_file_check_imports_only_what_it_uses(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    code = (
        "import sys\nfrom xlalint.cli import main\n"
        "sys.argv = ['xlalint', 'check', '--no-cache', '--output-format', 'concise', 'a.py']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nsys.stdout.flush()\n"
        f"heavy = {NOT_ON_THE_CHECK_PATH!r}\n"
        "found = sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in heavy))\n"
        "sys.stderr.write('IMPORTED:' + ','.join(found))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "XLA104" in result.stdout
    assert result.stderr.strip().endswith("IMPORTED:"), result.stderr


def test_split_lines_fast_path_splits_as_python_does():
    """`split_lines` splits `\\n`-only text with str.split: the same lines as splitting at
    every `\\r\\n`, `\\r` and `\\n` (and never at form feeds), with and without ends."""
    import random
    import re

    from xlalint.model import line_count

    def reference(text: str, keepends: bool) -> list[str]:
        parts = re.split(r"(\r\n|\r|\n)", text)
        lines = [parts[i] + (parts[i + 1] if keepends else "") for i in range(0, len(parts) - 1, 2)]
        return lines + ([parts[-1]] if parts[-1] else [])

    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(["a", "\n", "\r", "\x0c", "\u2028", " "]) for _ in range(rng.randint(0, 12)))
        for keepends in (False, True):
            assert split_lines(text, keepends) == reference(text, keepends), (text, keepends)
        assert line_count(text) == len(reference(text, False)), text


def test_lint_source_pauses_the_collector_and_leaves_no_parent_links():
    import ast
    import gc

    from xlalint.engine import lint as engine

    source = "import torch\nx = torch.ones(2).cuda()\nif not x.is_cuda and x == 1:\n    y = -x + 1\n"
    seen = {}
    original = engine.attach_parents

    def spy(tree):
        seen["gc"] = gc.isenabled()
        seen["nodes"] = original(tree)
        return seen["nodes"]

    engine.attach_parents = spy
    try:
        assert gc.isenabled()
        assert [f.code for f in lint_source(source, "a.py")] == ["XLA104"]
        assert gc.isenabled() and seen["gc"] is False
        gc.disable()
        try:
            lint_source(source, "a.py")
            assert not gc.isenabled()  # as it found it
        finally:
            gc.enable()
    finally:
        engine.attach_parents = original
    assert not any(hasattr(node, "parent") for node in seen["nodes"])
    # CPython's shared Load/Not/Add/Eq instances never get one (it would keep the tree alive).
    assert not any(hasattr(shared, "parent") for shared in (ast.Load(), ast.Not(), ast.Add(), ast.Eq()))
    tree = ast.parse(source)
    assert not any(hasattr(n, "parent") for n in ast.walk(tree) if isinstance(n, (ast.expr_context, ast.cmpop)))


def test_a_warm_rerun_reads_the_cache_without_a_process_pool(tmp_path, monkeypatch):
    import concurrent.futures

    from xlalint.engine.runner import PARALLEL_THRESHOLD, Job, process_all

    for i in range(PARALLEL_THRESHOLD + 3):
        (tmp_path / f"f{i}.py").write_text(f"import torch\nx{i} = torch.ones(2).cuda()\n")
    jobs = [Job(str(p), Settings(), cache_dir=str(tmp_path / ".cache")) for p in sorted(tmp_path.glob("*.py"))]
    cold = process_all(jobs)

    class NoPool:
        def __init__(self, *args, **kwargs):
            raise AssertionError("a process pool was started for cached files")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", NoPool)
    warm = process_all(jobs)
    assert [r.findings for r in warm] == [r.findings for r in cold]
    assert all(r.findings and r.findings[0].code == "XLA104" for r in warm)


WALK_SOURCE = """\
import torch as t
from a import (b as c, d)
global g
def f(x, /, y=1, *a, z: int = 2, **k) -> None:
    nonlocal_ = [i * 2 for i in range(3) if i > -1]
    lam = lambda q=3: q + 1
    match x:
        case {"k": v, **rest}: pass
        case [1, *others]: pass
        case C(a=1) as bound: pass
    try:
        del y
    except ValueError as e:
        raise
    return f"{x!r:>{y}}" if not x and y < 2 else t.ones(1)[1:2]
class K(Base, metaclass=M):
    async def m(self):
        async with a as (b, c):
            await b
"""


def test_child_nodes_and_subtree_are_ast_walks_without_the_shared_nodes():
    """The field-table walks find every node `ast` does, in the same order, but the
    shared contexts and operators (which may have no parent)."""
    import ast

    from xlalint.analysis.semantic import child_nodes, subtree

    shared = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    tree = ast.parse(WALK_SOURCE)
    walked = [n for n in ast.walk(tree) if not isinstance(n, shared)]
    assert len(walked) > 100
    for node in walked:
        assert child_nodes(node) == [c for c in ast.iter_child_nodes(node) if not isinstance(c, shared)]
    found = subtree(tree)
    assert len(found) == len(walked) and {id(n) for n in found} == {id(n) for n in walked}
    function = tree.body[3]
    assert {id(n) for n in subtree(function)} == {id(n) for n in ast.walk(function) if not isinstance(n, shared)}


def test_the_rule_selection_is_resolved_once_per_settings_and_path_when_it_depends_on_it():
    from xlalint.engine.lint import _selected_rules, selected_rules

    _selected_rules.cache_clear()
    settings = Settings(select=("XLA1",), ignore=("XLA104",))
    first = selected_rules(settings, "a.py")
    assert [r.code for r in first] == sorted({r.code for r in first}) and first
    assert all(r.code.startswith("XLA1") and r.code != "XLA104" for r in first)
    assert selected_rules(settings, "b/c.py") == first
    assert _selected_rules.cache_info().hits == 1  # no per-file-ignores: one resolution for both paths
    assert [r.code for r in selected_rules(settings, "a.py", select=["XLA10"])] == [
        r.code for r in first if r.code.startswith("XLA10")
    ]
    # A settings value that cannot be hashed (a list read from the config) is resolved uncached.
    odd = Settings(select=("XLA201",), rule_settings=(("XLA101", (("max-length", [1]),)),))
    assert [r.code for r in selected_rules(odd, "a.py")] == ["XLA201"]


def test_a_checked_files_tree_goes_with_it_and_its_garbage_is_collected_young(tmp_path):
    """``process`` lets the file's tree go and collects what the check left at once: the
    collector left to its thresholds traversed the live tree after each file (a sixth of
    a cold check)."""
    import gc

    from xlalint.engine.lint import parsed_tree
    from xlalint.engine.runner import Job, process

    path = tmp_path / "a.py"
    path.write_text("import torch\n" + "".join(f"x{i} = torch.ones(2).cuda()\n" for i in range(400)))
    gc.collect()
    report = process(Job(str(path), Settings(), follow=True))
    assert len(report.findings) == 400
    assert parsed_tree(report.source) is None
    assert gc.isenabled()
    assert gc.get_count()[0] < 1000, gc.get_count()


def test_a_warm_check_imports_no_rule_and_no_analysis_of_a_tree(tmp_path):
    """A check answered from the cache checks nothing: the rule modules, the walk and the
    analyses (``engine/lint.py``, ``engine/context.py``) are not imported; the codes its
    selectors are validated against come from the rule catalog."""
    for i in range(3):
        (tmp_path / f"f{i}.py").write_text(f"import torch\nx{i} = torch.ones(2).cuda()\n")
    (tmp_path / ".git").mkdir()  # the project root: the cache goes here
    code = (
        "import sys\nfrom xlalint.cli import main\n"
        "sys.argv = ['xlalint', 'check', '--output-format', 'concise', '--select', 'XLA1', '.']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nsys.stdout.flush()\n"
        "found = sorted(m for m in sys.modules if m.startswith(('xlalint.rules.xla', 'xlalint.analysis.semantic'))"
        " or m in ('xlalint.engine.lint', 'xlalint.engine.context', 'xlalint.engine.rule'))\n"
        "sys.stderr.write('IMPORTED:' + ','.join(found))\n"
    )
    runs = [subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)]
    runs.append(subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120))
    assert all(run.stdout.count("XLA104") == 3 for run in runs), runs
    assert "xlalint.rules.xla104_cuda_device" in runs[0].stderr  # the cold run checked
    assert runs[1].stderr.strip().endswith("IMPORTED:"), runs[1].stderr


def test_the_rule_catalog_names_every_rule_and_imports_only_the_ones_asked_for():
    code = (
        "import sys\nfrom xlalint.rules import rules_by_code, rules_for\n"
        "known = rules_by_code()\n"
        "assert 'XLA104' in known and 'XLA999' not in known and len(list(known)) == len(known)\n"
        "print(sorted(m for m in sys.modules if m.startswith('xlalint.rules.xla')))\n"
        "print([rule.code for rule in rules_for(['XLA201', 'XLA105'])])\n"
        "print(sorted(m for m in sys.modules if m.startswith('xlalint.rules.xla')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.splitlines() == [
        "[]",
        "['XLA105', 'XLA201']",
        "['xlalint.rules.xla105_missing_mp_fn', 'xlalint.rules.xla201_torch_save']",
    ], result.stderr
    from xlalint.rules import all_rules, rules_by_code

    assert list(rules_by_code()) == [rule.code for rule in all_rules()]
    assert all(rules_by_code()[rule.code] is rule for rule in all_rules())


def test_a_catalog_that_does_not_name_the_rule_modules_there_are_is_not_trusted(monkeypatch):
    """A rule module added since the catalog was generated still runs: the catalog
    gives way to importing every module."""
    from xlalint import rules

    monkeypatch.setattr(rules, "MODULES", {k: v for k, v in rules.MODULES.items() if k != "XLA201"})
    rules.rules_by_code.cache_clear()
    try:
        assert "XLA201" in rules.rules_by_code()
        assert not isinstance(rules.rules_by_code(), rules.RuleCatalog)
    finally:
        monkeypatch.undo()
        rules.rules_by_code.cache_clear()
    assert isinstance(rules.rules_by_code(), rules.RuleCatalog)


def test_a_run_looks_for_each_folders_project_root_once(tmp_path, monkeypatch):
    """``project.one_run``: the files of a run in one folder share its root's lookup;
    outside a run every lookup sees the filesystem as it is (a marker made since)."""
    import os

    from xlalint.analysis import project

    folder = tmp_path / "pkg"
    folder.mkdir()
    asked = []
    exists = os.path.exists
    monkeypatch.setattr(project.os.path, "exists", lambda path: asked.append(path) or exists(path))
    with project.one_run():
        first = project.project_root(folder / "a.py", None)
        looked = len(asked)
        assert project.project_root(folder / "b.py", None) == first
        assert len(asked) == looked  # not looked for again
    (folder / "pyproject.toml").write_text("")
    assert project.project_root(folder / "a.py", None) == folder
