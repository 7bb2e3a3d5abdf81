"""Findings that follow from the port (issues 21.5 and 23.5): `check` shows what `fix`
will change once XLA104's fixes make a CUDA script an XLA script, marked as such; `fix`
fixes exactly that many, and its summary says how many followed from the port."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from xlalint.engine import findings_json
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.model import split_lines

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CUDA_SAVE = """\
import torch

model = Net().cuda()
for x, y in loader:
    loss_fn(model(x.cuda()), y.cuda()).backward()
    opt.step()
torch.save(model.state_dict(), "model.pt")
"""


def after_port(source: str, **settings) -> list[tuple[str, int]]:
    return [(f.code, f.span.line) for f in lint_source(source, "train.py", Settings(**settings)) if f.after_port]


def test_the_examples_port_counts_what_fix_fixes():
    source = (EXAMPLES / "cuda_port.py").read_text()
    checked = lint_source(source, "cuda_port.py", Settings())
    assert len(checked) == 9  # the case: 8 before, and `fix` then fixed 9
    assert [(f.code, f.after_port) for f in checked if f.code == "XLA201"] == [("XLA201", True)]
    result = fix_source(source, "cuda_port.py", Settings(), unsafe=True)
    assert len(result.applied) == 9 and result.remaining == []
    assert sum(f.after_port for f in result.applied) == 1


def test_a_cuda_script_gets_the_xla_script_rules():
    assert after_port(CUDA_SAVE) == [("XLA201", 7)]
    # Already an XLA script: nothing follows from a port.
    assert after_port("import torch_xla\n" + CUDA_SAVE) == []
    # No CUDA at all: no port, no XLA-script rules.
    assert after_port(CUDA_SAVE.replace(".cuda()", "")) == []


def test_a_port_that_is_suppressed_brings_nothing():
    # With XLA104 suppressed on every line it would fix, no fix imports torch_xla.
    suppressed = "".join(
        line.replace("\n", "  # noqa: XLA104\n") if ".cuda()" in line else line
        for line in CUDA_SAVE.splitlines(keepends=True)
    )
    assert after_port(suppressed, select=("XLA104", "XLA201")) == []
    assert after_port(CUDA_SAVE, select=("XLA104", "XLA201")) == [("XLA201", 7)]


def test_a_port_inside_the_reported_call_keeps_the_finding():
    # The port rewrites the `.cuda()` inside the `torch.save` call, not the call: the
    # `torch.save` is still there after the port, and XLA201 still applies.
    source = CUDA_SAVE.replace("model.state_dict()", "model.cuda().state_dict()")
    assert after_port(source) == [("XLA201", 7)]


def test_a_safe_fix_applies_the_port_and_what_follows_in_one_run():
    (finding,) = [f for f in lint_source(CUDA_SAVE, "train.py", Settings()) if f.after_port]
    assert finding.fix is not None and finding.fix.applicability == "safe"
    result = fix_source(CUDA_SAVE, "train.py", Settings())
    assert "xm.save(model.state_dict()" in result.source
    assert sum(f.after_port for f in result.applied) == 1


def test_after_port_survives_the_cache_and_json(tmp_path, cli):
    (finding,) = [f for f in lint_source(CUDA_SAVE, "train.py", Settings()) if f.after_port]
    stamp = findings_json.FileStamp("train.py", len(CUDA_SAVE), 0, "0" * 64)
    data = findings_json.dumps("key", stamp, [finding])
    assert findings_json.loads(data, "key") == (stamp, [finding])
    findings_json.check_against([finding], "train.py", split_lines(CUDA_SAVE))

    (tmp_path / "train.py").write_text(CUDA_SAVE)
    result = cli("check", "--output-format", "json", "--no-cache", "train.py", cwd=tmp_path)
    rows = json.loads(result.stdout)
    assert [row["code"] for row in rows if row.get("after_port")] == ["XLA201"]
    assert all("after_port" not in row for row in rows if row["code"] != "XLA201")

    concise = cli("check", "--output-format", "concise", "--no-cache", "train.py", cwd=tmp_path).stdout.decode()
    (line,) = [line for line in concise.splitlines() if "XLA201" in line]
    assert line.endswith("use `xm.save` (after the port)")
    assert all(not line.endswith("(after the port)") for line in concise.splitlines() if "XLA104" in line)


def test_the_fix_summary_says_how_many_followed_from_the_port(tmp_path, cli):
    shutil.copy(EXAMPLES / "cuda_port.py", tmp_path / "cuda_port.py")
    diff = cli("fix", "--unsafe-fixes", "--diff", "--no-cache", "cuda_port.py", cwd=tmp_path)
    assert "Would fix 9 errors in 1 file; 1 of them appeared once the fixes made the file an XLA script." in (
        diff.stderr.decode()
    )
    fixed = cli("fix", "--unsafe-fixes", "--no-cache", "--output-format", "text", "cuda_port.py", cwd=tmp_path)
    assert "(9 fixed, 0 remaining; 1 of them appeared once the fixes made the file an XLA script)" in (
        fixed.stdout.decode()
    )


CUDA_LOADER_SAVE = """\
import torch
from torch.utils.data import DataLoader

model = Net().cuda()
loader = DataLoader(ds, batch_size=8, shuffle=True)
for x, y in loader:
    loss_fn(model(x.cuda()), y.cuda()).backward()
    opt.step()
torch.save(model.state_dict(), "model.pt")
"""


def test_the_findings_after_the_port_do_not_depend_on_selecting_xla104():
    # Issue 33 §2.8: the port is decided by XLA104 whether it is selected or not.
    plain = [(f.code, f.span.line) for f in lint_source(CUDA_LOADER_SAVE, "train.py", Settings()) if f.after_port]
    assert plain == [("XLA301", 5), ("XLA201", 9)]
    assert after_port(CUDA_LOADER_SAVE, select=("XLA301", "XLA201")) == plain
    assert after_port(CUDA_LOADER_SAVE, ignore=("XLA104",)) == plain
    assert after_port(CUDA_LOADER_SAVE, per_file_ignores=(("train.py", ("XLA104",)),)) == plain
    # Only what is selected is reported: XLA104 ran, but is not reported.
    selected = lint_source(CUDA_LOADER_SAVE, "train.py", Settings(), select=("XLA301", "XLA201"))
    assert {f.code for f in selected} == {"XLA301", "XLA201"}
    # Not porting, the fix written for the ported code is not offered (`fix --select XLA201`
    # would write `xm.save` into a CUDA script).
    assert all(f.fix is None for f in selected)
    assert fix_source(CUDA_LOADER_SAVE, "train.py", Settings(), select=("XLA201",)).source == CUDA_LOADER_SAVE
    # A port suppressed on every line it would fix still brings nothing.
    suppressed = CUDA_LOADER_SAVE.replace(".cuda())", ".cuda())  # noqa: XLA104").replace(
        ".cuda()\n", ".cuda()  # noqa: XLA104\n"
    )
    assert after_port(suppressed, select=("XLA301", "XLA201")) == []


def test_the_cli_and_the_config_report_the_findings_after_the_port(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA_LOADER_SAVE)

    def reported(*args: str) -> list[str]:
        out = cli("check", "--output-format", "concise", "--no-cache", *args, "train.py", cwd=tmp_path).stdout.decode()
        return [line.split(": ")[1].split()[0] for line in out.splitlines() if line.endswith("(after the port)")]

    assert reported() == ["XLA301", "XLA201"]
    assert reported("--select", "XLA301,XLA201") == ["XLA301", "XLA201"]
    assert reported("--ignore", "XLA104") == ["XLA301", "XLA201"]
    (tmp_path / "xlalint.toml").write_text('ignore = ["XLA104"]\n')
    assert reported() == ["XLA301", "XLA201"]


def test_the_ported_context_takes_torch_xla_as_imported_and_shares_the_step_analysis():
    import ast

    from xlalint.analysis.semantic import attach_parents
    from xlalint.engine.context import Context

    tree = ast.parse(CUDA_SAVE)
    nodes = attach_parents(tree)
    ctx = Context(CUDA_SAVE, "train.py", tree, Settings(), nodes)
    assert not ctx.semantic.imports.imports_module("torch_xla")
    assert "steps" not in ctx.ported().__dict__  # not built here: built there on first use
    steps = ctx.steps
    ported = ctx.ported()
    assert ported.semantic.imports.imports_module("torch_xla")
    assert not ctx.semantic.imports.imports_module("torch_xla")
    # Built once: what the step analysis finds does not depend on the import of torch_xla.
    assert ported.steps is steps and len(steps.loops) == 1


def _walked(rule_class, ctx, nodes) -> list[tuple]:
    """What one rule reports in ``ctx``, by the engine's walk (each node to its visit)."""
    rule = rule_class(ctx)
    rule.begin()
    for node in nodes:
        visit = getattr(rule, f"visit_{type(node).__name__}", None)
        if visit is not None:
            visit(node)
    rule.finish()
    return [(f.code, f.span, f.message) for f in rule.findings]


SCRIPTS = sorted(
    [
        *(Path(__file__).resolve().parent / "fixtures").rglob("*.py"),
        *EXAMPLES.glob("*.py"),
        *(Path(__file__).resolve().parent / "port_corpus").rglob("*.py"),
    ]
)


def test_a_rule_said_to_report_the_same_after_the_port_does_on_every_fixture():
    import ast

    from xlalint.analysis.semantic import attach_parents
    from xlalint.engine.context import Context
    from xlalint.rules import all_rules

    same = [rule for rule in all_rules() if rule.same_after_port]
    assert {rule.code for rule in same} >= {"XLA101", "XLA303"}
    compared = 0
    for path in SCRIPTS:
        source = path.read_text()
        tree = ast.parse(source)
        nodes = attach_parents(tree)
        ctx = Context(source, str(path), tree, Settings(), nodes)
        if ctx.semantic.imports.imports_module("torch_xla"):
            continue  # ported already
        ported = ctx.ported()
        for rule in same:
            found = _walked(rule, ctx, nodes)
            assert _walked(rule, ported, nodes) == found, f"{rule.code} on {path}"
            compared += bool(found)
    assert compared >= 5  # findings were made, on CUDA scripts
