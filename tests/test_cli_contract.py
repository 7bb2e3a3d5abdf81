"""The command line against SPEC.md, in process (typer's CliRunner): exit codes,
XLA000 handling, the output formats' fields and values, selection, config, stdin,
fix/diff, gitignore and the cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlalint.cli import app

CUDA = "import torch\nx = torch.ones(2).cuda()\n"
SYNC_LOOP = "import torch\nx = torch.ones(2).cuda()\nfor i in range(3):\n    torch.cuda.synchronize()\n"
# One safe fix (line 2) and one unsafe fix (the autocast, line 3).
SAFE_AND_UNSAFE = "import torch\nx = torch.ones(2).cuda()\nwith torch.cuda.amp.autocast():\n    pass\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder to run in; ``project("a.py", text)`` writes a file in it."""
    monkeypatch.chdir(tmp_path)

    def write(name: str, text: str | bytes = CUDA) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_bytes(text.encode())
        return path

    write.root = tmp_path
    return write


def run(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def lines(result) -> list[str]:
    return result.stdout.splitlines()


def codes_and_rows(result) -> list[tuple[str, int]]:
    return [(d["code"], d["location"]["row"]) for d in json.loads(result.stdout)]


def apply_edits(source: str, edits: list[dict]) -> str:
    """Apply ruff-style JSON edits (1-based rows and character columns)."""
    from xlalint.model import split_lines

    starts = [0]
    for line in split_lines(source, keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(loc: dict) -> int:
        return starts[loc["row"] - 1] + loc["column"] - 1

    for edit in sorted(edits, key=lambda e: (e["location"]["row"], e["location"]["column"]), reverse=True):
        source = source[: offset(edit["location"])] + edit["content"] + source[offset(edit["end_location"]) :]
    return source


# -- exit codes ---------------------------------------------------------------------------------
def test_exit_codes(project):
    project("ok.py", "import torch\nx = torch.ones(2)\n")
    project("bad.py")
    assert run("check", "--no-cache", "ok.py").exit_code == 0
    assert run("check", "--no-cache", "bad.py").exit_code == 1
    assert run("check", "--no-cache", "--exit-zero", "bad.py").exit_code == 0
    project("broken.py", "import torch\ndef f(:\n")
    # --exit-zero does not hide a file that cannot be parsed.
    assert run("check", "--no-cache", "--exit-zero", "broken.py").exit_code == 2
    assert run("check", "--no-cache", "--select", "NOPE1", "ok.py").exit_code == 2
    assert run("check", "--no-cache", "--target-version", "two", "ok.py").exit_code == 2


def test_fix_exit_code_is_0_when_everything_was_fixed(project):
    project("a.py")
    result = run("fix", "--no-cache", "a.py")
    assert result.exit_code == 0
    assert ".cuda()" not in (project.root / "a.py").read_text()


# -- XLA000 ---------------------------------------------------------------------------------------
def test_each_unreadable_file_is_one_line_and_the_rest_is_checked(project, monkeypatch):
    project("good.py")
    project("syntax.py", "import torch\nx = (\n")
    project("latin.py", b"import torch\ns = '\xe9'\n")
    project("nul.py", b"import torch\n\0\n")
    project("nb.ipynb", "{}")
    os.symlink("nowhere.py", project.root / "dangling.py")
    os.symlink("loop.py", project.root / "loop.py")
    deep = "import torch\nx = 1" + "+1" * 100_000 + "\n"
    project("deep.py", deep)
    result = run("check", "--no-cache", ".", "nb.ipynb")
    assert result.exit_code == 2
    out = lines(result)
    errors = [line for line in out if " XLA000 " in line]
    by_file = {line.split(":", 1)[0] for line in errors}
    assert by_file == {"syntax.py", "latin.py", "nul.py", "nb.ipynb", "dangling.py", "loop.py", "deep.py"}
    assert len(errors) == 7
    assert any(line.startswith("good.py:2:5: XLA104") for line in out)
    assert any(line.startswith("latin.py:2:6: XLA000") and "UTF-8" in line for line in errors)
    assert any(line.startswith("dangling.py:1:1: XLA000") and "symbolic link" in line for line in errors)
    assert any(line.startswith("deep.py:1:1: XLA000") and "nested too deeply" in line for line in errors)


def test_unreadable_and_huge_files(project, monkeypatch):
    from xlalint.engine import source

    project("big.py", CUDA + "# padding\n" * 100)
    project("secret.py")
    project("good.py")
    monkeypatch.setattr(source, "MAX_BYTES", 500)
    real_read_regular = source.read_regular

    def read_regular(path, limit):
        if Path(path).name == "secret.py":
            raise PermissionError(13, "Permission denied")
        return real_read_regular(path, limit)

    monkeypatch.setattr(source, "read_regular", read_regular)
    result = run("check", "--no-cache", ".")
    assert result.exit_code == 2
    out = lines(result)
    assert any(line.startswith("big.py:1:1: XLA000") and "too large" in line for line in out)
    assert any(line.startswith("secret.py:1:1: XLA000") and "Permission denied" in line for line in out)
    assert any(line.startswith("good.py:2:5: XLA104") for line in out)


def test_a_file_that_vanishes_during_the_run(project, monkeypatch):
    from xlalint.engine import files

    project("a.py")
    project("b.py")
    real = files.discover

    def discover(*args, **kwargs):
        yield from real(*args, **kwargs)
        (project.root / "b.py").unlink()

    monkeypatch.setattr(files, "discover", discover)
    result = run("check", "--no-cache", ".")
    assert result.exit_code == 2
    assert any(line.startswith("b.py:1:1: XLA000") and "does not exist" in line for line in lines(result))
    assert any(line.startswith("a.py:2:5: XLA104") for line in lines(result))


def test_a_rule_that_crashes_costs_one_file_not_the_run(project, monkeypatch):
    from xlalint.engine import lint as engine

    project("a.py")
    project("boom.py", "import torch\nBOOM = torch.ones(2).cuda()\n")
    real = engine._dispatch

    def dispatch(nodes, rules):
        if any(isinstance(n, engine.ast.Name) and n.id == "BOOM" for n in nodes):
            raise KeyError("bug")
        return real(nodes, rules)

    monkeypatch.setattr(engine, "_dispatch", dispatch)
    result = run("check", "--no-cache", ".")
    assert result.exit_code == 2
    out = lines(result)
    assert any(line.startswith("boom.py:1:1: XLA000 internal error") for line in out)
    assert any(line.startswith("a.py:2:5: XLA104") for line in out)


def test_empty_file_and_directory_named_like_a_module(project):
    project("empty.py", "")
    (project.root / "pkg.py").mkdir()
    project("pkg.py/inner.py")
    result = run("check", "--no-cache", ".")
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in lines(result) if "XLA" in line] == ["pkg.py/inner.py"]


# -- formats --------------------------------------------------------------------------------------
def test_text_line_format_and_marker(project):
    project("u.py", SAFE_AND_UNSAFE)
    out = lines(run("check", "--no-cache", "u.py"))
    assert out[0].startswith("u.py:2:5: XLA104 [*] ")
    assert out[1].startswith("u.py:3:6: XLA104 ") and "[*]" not in out[1]
    out = lines(run("check", "--no-cache", "--unsafe-fixes", "u.py"))
    assert out[1].startswith("u.py:3:6: XLA104 [*] ")
    safe_only = lines(run("check", "--no-cache", "u.py"))
    assert lines(run("check", "--no-cache", "--output-format", "concise", "u.py"))[:2] == safe_only[:2]


def test_fix_does_not_mark_what_it_would_not_fix(project):
    project("u.py", SAFE_AND_UNSAFE)
    result = run("fix", "--no-cache", "u.py")
    assert result.exit_code == 1
    remaining = [line for line in lines(result) if "XLA104" in line]
    assert len(remaining) == 1 and "[*]" not in remaining[0]


def test_json_values(project):
    source = "import torch\ns = 'é😀'; x = torch.ones(2).cuda()\n"
    project("a.py", source)
    result = run("check", "--no-cache", "--output-format", "json", "a.py")
    assert result.exit_code == 1
    [item] = json.loads(result.stdout)
    assert item["code"] == "XLA104"
    assert item["filename"] == str(project.root / "a.py")
    # Columns count characters, 1-based; the end is exclusive.
    assert item["location"] == {"row": 2, "column": 15}
    assert item["end_location"] == {"row": 2, "column": 35}
    assert item["noqa_row"] == 2
    assert "url" in item
    assert item["fix"]["applicability"] == "safe" and item["fix"]["message"]
    fixed = run("fix", "--no-cache", "--diff", "a.py")
    assert fixed.exit_code == 1
    assert (project.root / "a.py").read_text() == source  # --diff writes nothing
    from xlalint.engine.fixing import fix_source

    assert apply_edits(source, item["fix"]["edits"]) == fix_source(source, "a.py").source


@pytest.mark.parametrize(
    "source",
    [
        "import torch\r\nx = 1\r\ny = torch.ones(2).cuda()\r\n",
        "import torch\rx = torch.ones(2).cuda()\r",
        "import torch\n# a\u2028b \x0c c\nz = 'é'; y = torch.ones(1).cuda()\n",
        "import torch\nif True:\n\tx = torch.ones(2).cuda()\n",
        "import torch\nx = torch.ones(2).cuda()",
        "import torch\ntorch.cuda.synchronize()\n",
        "import torch as T\nT.cuda.empty_cache()\n",
        "from torch import cuda\ncuda.synchronize()\n",
        "import torch\nx = (torch.ones(2)\n     .cuda())\n",
    ],
)
def test_json_edits_reproduce_the_fix(project, source):
    from xlalint.engine.config import Settings
    from xlalint.engine.lint import lint_source
    from xlalint.fixers.apply import apply_fixes

    project("a.py", source)
    result = run("check", "--no-cache", "--output-format", "json", "a.py")
    items = json.loads(result.stdout)
    findings = lint_source(source, "a.py", Settings())
    assert len(items) == len(findings) >= 1
    for item, finding in zip(items, findings, strict=True):
        assert item["location"] == {"row": finding.span.line, "column": finding.span.col + 1}
        expected, _ = apply_fixes(source, [finding.fix])
        assert apply_edits(source, item["fix"]["edits"]) == expected


def test_json_after_fix_has_edits_for_what_remains(project):
    project("u.py", SAFE_AND_UNSAFE)
    result = run("fix", "--no-cache", "--output-format", "json", "u.py")
    [item] = json.loads(result.stdout)
    fixed = (project.root / "u.py").read_text()
    assert item["location"]["row"] == fixed.splitlines().index("with torch.cuda.amp.autocast():") + 1
    assert item["fix"]["applicability"] == "unsafe" and item["fix"]["edits"]
    assert "torch.autocast(" in apply_edits(fixed, item["fix"]["edits"])


def test_json_lines_github_junit(project):
    project("a.py")
    project("b.py", "import torch\ndef f(:\n")
    jl = run("check", "--no-cache", "--output-format", "json-lines", "a.py", "b.py")
    assert jl.exit_code == 2
    assert [json.loads(line)["code"] for line in lines(jl)] == ["XLA104", "XLA000"]
    gh = lines(run("check", "--no-cache", "--output-format", "github", "a.py", "b.py"))
    assert gh[0] == (
        "::error title=xlalint (XLA104),file=a.py,line=2,col=5,endLine=2,endColumn=25::"
        "a.py:2:5: XLA104 `.cuda()` moves to a CUDA device: use `.to(torch_xla.device())`"
    )
    assert gh[1].startswith("::error title=xlalint (XLA000),file=b.py,line=2,col=7,")
    import xml.etree.ElementTree as ET

    junit = ET.fromstring(run("check", "--no-cache", "--output-format", "junit", "a.py", "b.py").stdout)
    cases = junit.findall(".//testcase")
    assert [(c.get("classname"), c.get("line"), c.get("column")) for c in cases] == [
        ("a.py", "2", "5"),
        ("b.py", "2", "7"),
    ]


def test_sarif_is_valid_and_code_scanning_ready(project):
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = Path("/work/shared/schemas/sarif-schema-2.1.0.json")
    if not schema_path.exists():
        pytest.skip("no SARIF schema here")
    project("a.py", SAFE_AND_UNSAFE)
    project("sub/b.py", "import torch\ndef f(:\n")
    result = run("check", "--no-cache", "--output-format", "sarif", ".")
    assert result.exit_code == 2
    log = json.loads(result.stdout)
    jsonschema.Draft4Validator(json.loads(schema_path.read_text())).validate(log)
    run_ = log["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    assert all(rule["help"]["text"] for rule in rules)
    ids = [rule["id"] for rule in rules]
    for res in run_["results"]:
        assert ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert not loc["artifactLocation"]["uri"].startswith(("/", "file:"))
        assert loc["region"]["startLine"] >= 1 and loc["region"]["startColumn"] >= 1
    uris = {res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for res in run_["results"]}
    assert uris == {"a.py", "sub/b.py"}


def test_statistics(project):
    project("a.py", SAFE_AND_UNSAFE)
    project("b.py")
    result = run("check", "--no-cache", "--statistics", ".")
    assert result.exit_code == 1
    assert lines(result)[0].split("\t")[:3] == ["3", "XLA104", "[*] cuda-device"]
    data = json.loads(run("check", "--no-cache", "--statistics", "--output-format", "json", ".").stdout)
    assert data == [{"code": "XLA104", "name": "cuda-device", "count": 3, "fixable": True}]


def test_show_fixes_counts_only_what_would_be_applied(project):
    project("u.py", SAFE_AND_UNSAFE)
    out = run("check", "--no-cache", "--show-fixes", "u.py").stdout
    assert "Fixable 1 error:" in out and "1 x XLA104" in out
    out = run("check", "--no-cache", "--show-fixes", "--unsafe-fixes", "u.py").stdout
    assert "Fixable 2 errors:" in out
    out = run("fix", "--no-cache", "--show-fixes", "u.py").stdout
    assert "Fixed 1 error:" in out


def test_quiet_prints_findings_only(project):
    project("a.py")
    result = run("check", "--no-cache", "--quiet", "a.py")
    assert lines(result) == [lines(result)[0]] and lines(result)[0].startswith("a.py:2:5: XLA104")


# -- selection --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, expected",
    [
        ((), 2),
        (("--select", "XLA104"), 2),
        (("--select", "xla1"), 2),
        (("--select", "XLA101,XLA104"), 2),
        (("--select", "XLA101", "--select", "XLA104"), 2),
        (("--select", "ALL", "--ignore", "XLA10"), 0),
        (("--select", "XLA1", "--ignore", "XLA104"), 0),
        # The more specific selector wins, as in ruff.
        (("--select", "XLA104", "--ignore", "XLA1"), 2),
        (("--ignore", "XLA104"), 0),
        (("--select", "XLA101", "--extend-select", "XLA104"), 2),
        (("--select", "XLA101"), 0),
    ],
)
def test_select_ignore_extend_select(project, args, expected):
    project("a.py", SYNC_LOOP)
    result = run("check", "--no-cache", "--output-format", "json", *args, "a.py")
    assert len(json.loads(result.stdout)) == expected


@pytest.mark.parametrize(
    "args, expected",
    [
        ((), 0),
        # --ignore adds to the file's ignore, it does not replace it.
        (("--ignore", "XLA102"), 0),
        # --select starts afresh, --extend-select re-enables: the command line wins.
        (("--select", "XLA104"), 2),
        (("--extend-select", "XLA104"), 2),
    ],
)
def test_command_line_selection_on_top_of_config(project, args, expected):
    project("pyproject.toml", '[tool.xlalint]\nignore = ["XLA104"]\n')
    project("a.py", SYNC_LOOP)
    result = run("check", "--no-cache", "--output-format", "json", *args, "a.py")
    assert len(json.loads(result.stdout)) == expected


# -- config -----------------------------------------------------------------------------------------
def test_nearest_config_wins_and_unknown_keys_are_named(project):
    project("pyproject.toml", '[tool.xlalint]\nselect = ["XLA104"]\n')
    project("sub/xlalint.toml", 'select = ["XLA101"]\n')
    project("a.py")
    project("sub/b.py")
    project("sub/deeper/c.py")
    out = lines(run("check", "--no-cache", "-q", "."))
    assert [line.split(":")[0] for line in out] == ["a.py"]
    # Run from inside: the config is found walking up from each file.
    os.chdir(project.root / "sub" / "deeper")
    assert run("check", "--no-cache", "-q", str(project.root / "a.py")).exit_code == 1
    assert run("check", "--no-cache", "-q", "c.py").exit_code == 0
    project("sub/xlalint.toml", "slect = []\n")
    result = run("check", "--no-cache", "c.py")
    assert result.exit_code == 2
    assert "`slect`" in result.stderr


def test_rule_option_table_and_explicit_config(project):
    project("cfg.toml", "[tool.xlalint.rules.XLA101]\nmax-lenght = 3\n")
    project("a.py")
    result = run("check", "--no-cache", "--config", "cfg.toml", "a.py")
    assert result.exit_code == 2 and "max-lenght" in result.stderr
    project("cfg.toml", '[tool.xlalint]\nignore = ["XLA104"]\n[tool.xlalint.rules.XLA101]\nmax-length = 3\n')
    assert run("check", "--no-cache", "--config", "cfg.toml", "a.py").exit_code == 0
    result = run("check", "--no-cache", "--config", "missing.toml", "a.py")
    assert result.exit_code == 2 and "missing.toml" in result.stderr


def test_exclude_per_file_ignores_and_force_exclude(project):
    project(
        "pyproject.toml",
        '[tool.xlalint]\nexclude = ["gen_*.py", "vendor"]\n[tool.xlalint.per-file-ignores]\n"tests/*.py" = ["XLA104"]\n',
    )
    for name in ("a.py", "gen_x.py", "vendor/v.py", "tests/t.py"):
        project(name)
    out = lines(run("check", "--no-cache", "-q", "."))
    assert [line.split(":")[0] for line in out] == ["a.py"]
    # Named explicitly: checked, unless --force-exclude.
    assert run("check", "--no-cache", "gen_x.py", "vendor/v.py").exit_code == 1
    assert run("check", "--no-cache", "--force-exclude", "gen_x.py", "vendor/v.py").exit_code == 0
    assert run("check", "--no-cache", "tests/t.py").exit_code == 0


TRAIN_LOOP = """\
import torch
import torch_xla

device = torch_xla.device()
model = torch.nn.Linear(2, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in range(10):
    loss = model(torch.ones(2, device=device)).sum()
    loss.backward()
    opt.step()
"""


def test_target_version_from_command_line_and_config(project):
    project("a.py", TRAIN_LOOP)
    assert "+    xm.mark_step()" in run("fix", "--diff", "--target-version", "2.3", "a.py").stdout
    assert "+    torch_xla.sync()" in run("fix", "--diff", "--target-version", "2.9", "a.py").stdout
    project("pyproject.toml", '[tool.xlalint]\ntarget-version = "2.3"\n')
    assert "+    xm.mark_step()" in run("fix", "--diff", "a.py").stdout
    # The command line overrides the file.
    assert "+    torch_xla.sync()" in run("fix", "--diff", "--target-version", "2.9", "a.py").stdout


# -- stdin ------------------------------------------------------------------------------------------
def test_stdin_dash_and_stdin_filename(project):
    project("pyproject.toml", '[tool.xlalint]\nper-file-ignores = {"skip/*" = ["XLA104"]}\n')
    result = run("check", "--no-cache", "-", input=CUDA)
    assert result.exit_code == 1 and lines(result)[0].startswith("-:2:5: XLA104 [*]")
    result = run("check", "--stdin-filename", "src/train.py", input=CUDA)
    assert lines(result)[0].startswith("src/train.py:2:5: XLA104")
    result = run("check", "--stdin-filename", "skip/train.py", "-", input=CUDA)
    assert result.exit_code == 0
    result = run("check", "-", input=b"import torch\nx = '\xff'\n")
    assert result.exit_code == 2 and "XLA000" in result.stdout
    result = run("check", "-", "a.py", input=CUDA)
    assert result.exit_code == 2


def test_fix_from_stdin_prints_the_code(project):
    result = run("fix", "--stdin-filename", "t.py", input=CUDA)
    assert result.exit_code == 0
    assert result.stdout.startswith("import torch\nimport torch_xla\n")
    diff = run("fix", "--diff", "-", input=CUDA)
    assert diff.exit_code == 1 and diff.stdout.startswith("--- a/-\n+++ b/-\n")


# -- fix --------------------------------------------------------------------------------------------
def test_fix_keeps_encoding_bom_newlines_and_mode(project):
    latin = project(
        "latin.py", b"# -*- coding: latin-1 -*-\r\nimport torch\r\ns = '\xe9'\r\nx = torch.ones(2).cuda()\r\n"
    )
    latin.chmod(0o754)
    bom = project("bom.py", b"\xef\xbb\xbf" + CUDA.encode())
    mac = project("mac.py", CUDA.replace("\n", "\r").encode())
    real = project("real.py")
    os.symlink("real.py", project.root / "link.py")
    result = run("fix", "--no-cache", "latin.py", "bom.py", "mac.py", "link.py")
    assert result.exit_code == 0, result.stdout
    data = latin.read_bytes()
    assert b"s = '\xe9'\r\n" in data and b"torch_xla.device()" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert latin.stat().st_mode & 0o777 == 0o754
    assert bom.read_bytes().startswith(b"\xef\xbb\xbfimport torch\n") and bom.read_bytes().count(b"\xef\xbb\xbf") == 1
    assert mac.read_bytes().endswith(b"device())\r") and b"\n" not in mac.read_bytes()
    assert (project.root / "link.py").is_symlink() and "torch_xla.device()" in real.read_text()
    assert not [p for p in project.root.iterdir() if "xlalint-tmp" in p.name]
    # Already fixed: nothing changes.
    before = {p.name: p.read_bytes() for p in project.root.iterdir() if p.is_file()}
    again = run("fix", "--no-cache", ".")
    assert again.exit_code == 0
    assert {p.name: p.read_bytes() for p in project.root.iterdir() if p.is_file()} == before


def test_fix_never_writes_code_that_does_not_parse(project, monkeypatch):
    import xlalint.fixers.apply as apply

    path = project("a.py")
    monkeypatch.setattr(apply, "apply_fixes", lambda source, fixes, *_line_length: (source + "def (:\n", list(fixes)))
    result = run("fix", "--no-cache", "a.py")
    assert result.exit_code == 2
    assert path.read_text() == CUDA
    assert "does not parse" in result.stderr


def test_diff_exit_codes(project):
    project("a.py")
    assert run("fix", "--diff", "a.py").exit_code == 1
    assert run("fix", "--diff", "--exit-zero", "a.py").exit_code == 0
    assert (project.root / "a.py").read_text() == CUDA
    project("ok.py", "import torch\n")
    result = run("fix", "--diff", "ok.py")
    assert result.exit_code == 0 and result.stdout == ""


def test_noqa_of_other_tools_survives_a_fix(project):
    path = project(
        "a.py", "import torch\nx = torch.ones(2).cuda()  # noqa: E501\ntorch.cuda.synchronize()  # noqa:E402\n"
    )
    assert run("fix", "--no-cache", "a.py").exit_code == 0
    text = path.read_text()
    assert "torch_xla.device())  # noqa: E501\n" in text and "  # noqa:E402\n" in text


# -- walking ----------------------------------------------------------------------------------------
def test_gitignore_nested_and_negated(project):
    (project.root / ".git").mkdir()
    project(".gitignore", "gen*.py\ncache/\nlogs/*\n!logs/keep.py\n")
    project("pkg/.gitignore", "!gen_kept.py\nlocal.py\n")
    for name in ("a.py", "gen_x.py", "cache/c.py", "logs/l.py", "logs/keep.py", "pkg/gen_kept.py", "pkg/local.py"):
        project(name)
    out = lines(run("check", "--no-cache", "-q", "."))
    assert sorted(line.split(":")[0] for line in out) == ["a.py", "logs/keep.py", "pkg/gen_kept.py"]


def test_a_folder_named_on_the_command_line_is_walked_though_a_gitignore_above_ignores_it(project):
    """As ruff: `check .venv/lib/.../torch` or `check build/gen` checks what is there; the
    .gitignore still decides below the folder named."""
    (project.root / ".git").mkdir()
    project(".gitignore", "vendored/\n*_gen.py\nskip/\n")
    for name in ("vendored/pkg/a.py", "vendored/pkg/b_gen.py", "vendored/pkg/skip/c.py"):
        project(name, CUDA)
    assert lines(run("check", "--no-cache", "-q", ".")) == []
    out = lines(run("check", "--no-cache", "-q", "vendored/pkg"))
    assert sorted({line.split(":")[0] for line in out}) == ["vendored/pkg/a.py"]


def test_gitignore_outside_a_repository_applies_below_the_walked_folder(project):
    project(".gitignore", "sub/*.py\n")
    project("a.py")
    project("sub/b.py")
    out = lines(run("check", "--no-cache", "-q", "."))
    assert [line.split(":")[0] for line in out] == ["a.py"]


def test_many_files_in_parallel_match_serial(project, monkeypatch):
    from xlalint.engine import runner

    for i in range(20):
        project(f"m{i:02}.py", CUDA if i % 3 else "import torch\ndef f(:\n")
    parallel = run("check", "--no-cache", "--output-format", "json", ".")
    monkeypatch.setattr(runner, "PARALLEL_THRESHOLD", 10_000)
    serial = run("check", "--no-cache", "--output-format", "json", ".")
    assert parallel.exit_code == serial.exit_code == 2
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)
    assert len(json.loads(serial.stdout)) == 20


# -- cache ------------------------------------------------------------------------------------------
def test_cache_is_never_stale(project):
    path = project("a.py", SYNC_LOOP)

    def count(*args):
        return len(json.loads(run("check", "--output-format", "json", *args, "a.py").stdout))

    assert count() == 2
    assert (project.root / ".xlalint_cache").is_dir()
    assert count("--ignore", "XLA104") == 0  # changed settings
    project("pyproject.toml", '[tool.xlalint]\nignore = ["XLA104"]\n')
    assert count() == 0  # changed config file
    (project.root / "pyproject.toml").unlink()
    path.write_text(CUDA)
    assert count() == 1  # changed file
    project("b.py", CUDA)
    result = run("check", "--output-format", "json", "b.py")
    assert json.loads(result.stdout)[0]["filename"].endswith("b.py")  # another path
    assert count("--no-cache") == 1
