"""Reliability and security (issue 11): the cache holds data only and survives any
corruption, `fix` never loses an edit or writes a read-only file, stdin mode keeps the
bytes, bad config is one clear line, special files neither hang nor exhaust memory,
stale temp files are cleaned."""

from __future__ import annotations

import json
import os
import pickle
import stat
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine import findings_json, fixing
from xlalint.engine import source as sourcefile
from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source
from xlalint.model import (
    AddParameter,
    AppendToBody,
    Finding,
    Fix,
    Import,
    InsertStatement,
    MoveStatement,
    RemoveKeyword,
    RemoveStatement,
    ReplaceExpr,
    SetKeyword,
    Span,
    UnwrapWith,
    split_lines,
)

CUDA = "import torch\nx = torch.ones(2).cuda()\n"
STAMP = findings_json.FileStamp("a.py", 10, 20, "0" * 64)
FIXED = "import torch\nimport torch_xla\n\nx = torch.ones(2).to(torch_xla.device())\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, input: str | bytes | None = None):
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


# --- 1, 2: the cache ------------------------------------------------------------------


def cache_entries(root: Path) -> list[Path]:
    return [p for p in (root / ".xlalint_cache").glob("??/*") if not p.name.startswith(".")]


def test_cache_entries_are_json_data(project):
    (project / "a.py").write_text(CUDA)
    first = run("check", "a.py")
    [entry] = cache_entries(project)
    data = json.loads(entry.read_bytes())
    assert data["findings"][0]["code"] == "XLA104"
    assert data["findings"][0]["fix"]["type"] == "Fix"
    second = run("check", "a.py")  # from the cache
    assert second.stdout == first.stdout and second.exit_code == first.exit_code == 1


def test_entries_written_by_other_rule_code_are_not_used(project, monkeypatch):
    """A rule edited without a version bump (a checkout, a development install) must
    not be answered from the entries its old code wrote."""
    from xlalint.engine import cache

    (project / "a.py").write_text(CUDA)
    [entry] = (run("check", "a.py"), cache_entries(project))[1]
    stamp, _ = findings_json.loads(entry.read_bytes(), entry.name)
    entry.write_bytes(findings_json.dumps(entry.name, stamp, []))  # what "old code" would have found
    assert run("check", "a.py").exit_code == 0  # the same code: the entry answers
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "rules/xla104_cuda_device.py:1:2")
    result = run("check", "a.py")
    assert result.exit_code == 1 and "XLA104" in result.stdout


def test_the_code_fingerprint_follows_the_rule_modules():
    from xlalint.engine import cache
    from xlalint.rules import xla104_cuda_device

    stat = os.stat(xla104_cuda_device.__file__)
    assert f"rules/xla104_cuda_device.py:{stat.st_size}:{stat.st_mtime_ns}" in cache.code_fingerprint().split("\n")


class _Payload:
    """Unpickling this runs ``os.mkdir(marker)``."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_crafted_pickle_in_the_cache_runs_nothing(project):
    (project / "a.py").write_text(CUDA)
    expected = run("check", "a.py")
    [entry] = cache_entries(project)
    marker = project / "pwned"
    entry.write_bytes(pickle.dumps(_Payload(str(marker))))
    result = run("check", "a.py")
    assert not marker.exists()
    assert result.stdout == expected.stdout and result.exit_code == 1
    assert json.loads(entry.read_bytes())["findings"]  # rewritten as data


def _fix_of_every_kind() -> Fix:
    s = Span(1, 0, 1, 5)
    return Fix(
        "unsafe",
        "every operation",
        (
            ReplaceExpr(s, "{a}.to(d)", (("a", Span(2, 4, 2, 9)),)),
            SetKeyword(s, "max_length", "512", only_if_missing=True),
            RemoveKeyword(s, "device"),
            InsertStatement(s, "xm.mark_step()", "after", (("x", s),)),
            RemoveStatement(s),
            MoveStatement(s, Span(2, 0, 2, 3), "after"),
            AppendToBody(s, "pass"),
            AddParameter(s, "index"),
            UnwrapWith(s),
        ),
        imports=(Import("torch_xla"), Import("torch_xla.core.xla_model", None, "xm")),
        unused_imports=(Import("torch", "cuda"),),
    )


def test_every_operation_survives_the_round_trip():
    finding = Finding("XLA999", "demo", "msg é", "a.py", Span(2, 0, 2, 3), _fix_of_every_kind(), 2, (1, 2))
    plain = Finding("XLA104", "cuda-device", "m", "a.py", Span(1, 0, 1, 1))
    data = findings_json.dumps("k", STAMP, [finding, plain])
    stamp, [back, plain_back] = findings_json.loads(data, "k")
    assert stamp == STAMP
    assert back == finding and back.noqa_lines == (1, 2) and plain_back == plain


def test_real_findings_survive_the_round_trip():
    from xlalint.rules import all_rules

    for rule in all_rules():
        for example in rule.INVALID:
            findings = lint_source(example.code, "t.py", Settings())
            data = findings_json.dumps("k", STAMP, findings)
            assert findings_json.loads(data, "k") == (STAMP, findings)
            findings_json.check_against(findings, "t.py", split_lines(example.code))  # within the file


def _entry(findings: list) -> bytes:
    entry = {"format": findings_json.FORMAT, "key": "KEY", "file": "FILE", "findings": findings}
    return json.dumps(entry).encode()


def _good() -> dict:
    return json.loads(findings_json.dumps("KEY", STAMP, lint_source(CUDA, "a.py", Settings())))["findings"][0]


def _with(path: tuple, value) -> bytes:
    finding = _good()
    target = finding
    for part in path[:-1]:
        target = target[part]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return _entry([finding])


CORRUPT = {
    "random bytes": os.urandom(64) + b"\xff\xfe",
    "empty": b"",
    "not JSON": b"{'findings': [}",
    "a list": b"[]",
    "an empty object": b"{}",
    "no findings key": json.dumps({"format": findings_json.FORMAT, "key": "KEY", "file": "FILE"}).encode(),
    "another key": _entry([]).replace(b'"KEY"', b'"OTHER"'),
    "another format": _entry([]).replace(f'"format": {findings_json.FORMAT}'.encode(), b'"format": 99'),
    "findings not a list": _entry({"a": 1}),  # type: ignore[arg-type]
    "a finding that is a string": _entry(["XLA104"]),
    "a line as a string": _with(("span", "line"), "2"),
    "a line as a float": _with(("span", "line"), 2.0),
    "a boolean line": _with(("span", "line"), True),
    "a huge line": _with(("span", "line"), 10**30),
    "a line beyond the file": _with(("span", "end_line"), 99),
    "a negative column": _with(("span", "col"), -1),
    "a huge literal": _with(("span", "col"), 1).replace(b'"col": 1', b'"col": 1' + b"0" * 5000),
    "a missing field": _with(("message",), KeyError),
    "an extra field": _with(("extra",), 1),
    "the wrong type tag": _with(("type",), "Fix"),
    "an unknown operation": _with(("fix", "operations", 0, "type"), "RunShell"),
    "a bad applicability": _with(("fix", "applicability"), "maybe"),
    "a fix that is a list": _with(("fix",), []),
    "deep nesting": _entry([]).replace(b"[]", b"[" * 100_000 + b"]" * 100_000),
    "NaN": _with(("span", "line"), float("nan")),
}


@pytest.mark.parametrize("name", list(CORRUPT))
def test_a_corrupt_entry_is_a_miss_and_is_rewritten(project, name):
    (project / "a.py").write_text(CUDA)
    expected = run("check", "a.py")
    [entry] = cache_entries(project)
    key = entry.name
    stamp = json.dumps(json.loads(entry.read_bytes())["file"]).encode()  # the real file's
    entry.write_bytes(CORRUPT[name].replace(b"KEY", key.encode()).replace(b'"FILE"', stamp))
    result = run("check", "a.py")
    assert (result.exit_code, result.stdout) == (expected.exit_code, expected.stdout)
    assert findings_json.loads(entry.read_bytes(), key)[1] == lint_source(CUDA, "a.py", Settings())


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_a_cache_entry_that_is_not_a_file_is_a_miss(project, kind):
    (project / "a.py").write_text(CUDA)
    expected = run("check", "a.py")
    [entry] = cache_entries(project)
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "dev-zero":
        entry.symlink_to("/dev/zero")
    else:
        entry.mkdir()
    result = _in_thread(lambda: run("check", "a.py"))
    assert (result.exit_code, result.stdout) == (expected.exit_code, expected.stdout)


def test_a_cache_folder_linked_elsewhere_is_not_written(project, tmp_path_factory):
    (project / "a.py").write_text(CUDA)
    run("check", "a.py")
    [entry] = cache_entries(project)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    subfolder = entry.parent
    for path in subfolder.iterdir():
        path.unlink()
    subfolder.rmdir()
    subfolder.symlink_to(elsewhere, target_is_directory=True)
    assert run("check", "a.py").exit_code == 1
    assert list(elsewhere.iterdir()) == []


def _in_thread(call, timeout: float = 60):
    """``call()``, failing (not hanging the suite) if it blocks."""
    box: list = []
    worker = threading.Thread(target=lambda: box.append(call()), daemon=True)
    worker.start()
    worker.join(timeout)
    assert box, "blocked"
    return box[0]


# --- 3, 4: fix writes only what the user would want -------------------------------------


def test_fix_does_not_overwrite_an_edit_made_while_it_ran(project, monkeypatch):
    path = project / "a.py"
    path.write_text(CUDA)
    real_fix = fixing.fix_source

    def fix_while_the_user_edits(*args, **kwargs):
        result = real_fix(*args, **kwargs)
        path.write_text(CUDA + "y = 1\n")  # the user saves meanwhile
        return result

    monkeypatch.setattr(fixing, "fix_source", fix_while_the_user_edits)
    result = run("fix", "a.py")
    assert path.read_text() == CUDA + "y = 1\n"
    assert result.exit_code == 2
    assert "not written: the file changed while it was being fixed" in result.stderr
    assert not list(project.glob(".*xlalint-tmp"))


def test_an_edit_of_the_same_size_within_the_clock_tick_is_seen(project, monkeypatch):
    path = project / "a.py"
    path.write_text(CUDA)
    real_fix = fixing.fix_source
    before = path.stat()

    def same_size_same_time(*args, **kwargs):
        result = real_fix(*args, **kwargs)
        path.write_text(CUDA.replace("ones", "ONES"))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        return result

    monkeypatch.setattr(fixing, "fix_source", same_size_same_time)
    result = run("fix", "a.py")
    assert path.read_text() == CUDA.replace("ones", "ONES") and result.exit_code == 2


def test_a_read_only_file_is_not_written(project):
    path = project / "a.py"
    path.write_text(CUDA)
    path.chmod(0o444)
    result = run("fix", "a.py")
    assert path.read_text() == CUDA
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert "a.py: not written: read-only" in result.stderr
    assert result.exit_code == 2
    assert "XLA104" in result.stdout  # still reported, not counted as fixed
    assert "Fixed" not in result.stdout


def test_other_files_are_fixed_beside_a_read_only_one(project):
    (project / "a.py").write_text(CUDA)
    (project / "a.py").chmod(0o444)
    (project / "b.py").write_text(CUDA)
    result = run("fix", ".")
    assert (project / "b.py").read_text() == FIXED and (project / "a.py").read_text() == CUDA
    assert result.exit_code == 2


def test_stale_temp_files_are_removed_and_fresh_ones_kept(project):
    (project / "a.py").write_text(CUDA)
    stale = project / ".a.py.k3j_9x0a.xlalint-tmp"
    fresh = project / ".a.py.abcdefgh.xlalint-tmp"
    other = project / ".a.py.old.backup"  # not our name: never touched
    for path in (stale, fresh, other):
        path.write_text("partial")
    old = time.time() - sourcefile.STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    assert run("fix", "a.py").exit_code == 0
    assert not stale.exists() and fresh.exists() and other.exists()


def test_check_does_not_remove_temp_files(project):
    (project / "a.py").write_text(CUDA)
    stale = project / ".a.py.k3j_9x0a.xlalint-tmp"
    stale.write_text("partial")
    old = time.time() - sourcefile.STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    run("check", "a.py")
    assert stale.exists()


# --- 6: stdin ----------------------------------------------------------------------------


def test_stdin_fix_keeps_a_latin1_encoding(project):
    data = "# -*- coding: latin-1 -*-\n# café\n".encode("latin-1") + CUDA.encode()
    result = run("fix", "-", input=data)
    assert result.stdout_bytes.startswith("# -*- coding: latin-1 -*-\n# café\n".encode("latin-1"))
    assert result.stdout_bytes.decode("latin-1").endswith(FIXED.split("\n", 1)[1])


def test_stdin_fix_keeps_the_bom(project):
    result = run("fix", "-", input=b"\xef\xbb\xbf" + CUDA.encode())
    assert result.stdout_bytes == b"\xef\xbb\xbf" + FIXED.encode()


@pytest.mark.parametrize(
    "data",
    [
        b"import torch\nx = '\xff'\ny = torch.ones(2).cuda()\n",  # not UTF-8
        b"import torch\nx = torch.ones(2).cuda(\n",  # a syntax error
        b"\x00\x01binary",
        b"# coding: no-such-codec\nx = 1\n",
    ],
)
def test_stdin_fix_echoes_input_it_cannot_fix(project, data):
    result = run("fix", "-", input=data)
    assert result.stdout_bytes == data
    assert result.exit_code == 2


def test_stdin_fix_echoes_the_input_on_an_internal_error(project, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(fixing, "fix_source", broken)
    data = "# coding: latin-1\nx = 'é'\n".encode("latin-1") + CUDA.encode()
    result = run("fix", "-", input=data)
    assert result.stdout_bytes == data and result.exit_code == 2


# --- 7: configuration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('tool = "x"\n', "`tool`"),
        ("[tool]\nxlalint = 5\n", "`tool.xlalint`"),
        ('[tool.xlalint.per-file-ignores]\n"*.py" = "XLA104"\n', 'per-file-ignores."*.py"'),
        ('[tool.xlalint.per-file-ignores]\n"*.py" = ["XLA999"]\n', 'per-file-ignores."*.py"'),
        ('[tool.xlalint.per-file-ignores]\n"*.py" = [1]\n', 'per-file-ignores."*.py"'),
        ("[tool.xlalint]\ntarget-version = 2.10\n", "target-version"),
        ('[tool.xlalint]\ntarget-version = "1.0"\n', "target-version"),
        ('[tool.xlalint]\ntarget-version = "99.99"\n', "target-version"),
        ('[tool.xlalint]\ntarget-version = "2.10"\n', "target-version"),
        ('[tool.xlalint]\ntarget-version = "2.9x"\n', "target-version"),
        ("[tool.xlalint.rules.XLA101]\nmax-length = -5\n", "max-length"),
        ("[tool.xlalint.rules.XLA101]\nmax-length = 0\n", "max-length"),
        ("[tool.xlalint.rules.XLA101]\nmax-length = 99999999999\n", "max-length` must be at most 1048576"),
        ("[tool.xlalint.rules]\nXLA101 = 5\n", "rules.XLA101"),
        ('[tool.xlalint]\nselect = "XLA1"\n', "select"),
        ("[tool.xlalint]\nrules = 3\n", "rules"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(project, toml, named):
    (project / "pyproject.toml").write_text(toml)
    (project / "a.py").write_text(CUDA)
    result = run("check", "--no-cache", "a.py")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert named in line and line.startswith("xlalint: error: ")


def test_target_version_error_says_the_range(project):
    (project / "pyproject.toml").write_text('[tool.xlalint]\ntarget-version = "1.0"\n')
    (project / "a.py").write_text(CUDA)
    assert '"1.5" to "2.9"' in run("check", "a.py").stderr
    assert '"1.5" to "2.9"' in run("check", "--target-version", "3.0", "a.py").stderr


@pytest.mark.parametrize("version", ["1.5", "1.13", "2.0", "2.3", "2.9", "2.9.0"])
def test_real_target_versions_are_accepted(project, version):
    (project / "pyproject.toml").write_text(f'[tool.xlalint]\ntarget-version = "{version}"\n')
    (project / "a.py").write_text("x = 1\n")
    assert run("check", "--no-cache", "a.py").exit_code == 0


def test_a_per_file_ignore_still_works(project):
    (project / "pyproject.toml").write_text('[tool.xlalint.per-file-ignores]\n"a.py" = ["XLA104"]\n')
    (project / "a.py").write_text(CUDA)
    (project / "b.py").write_text(CUDA)
    result = run("check", "--no-cache", ".")
    assert "b.py:2" in result.stdout and "a.py:2" not in result.stdout


# --- 8: special files ----------------------------------------------------------------------


def test_a_fifo_is_not_read(project):
    (project / "a.py").write_text(CUDA)
    os.mkfifo(project / "pipe.py")
    walked = _in_thread(lambda: run("check", "--no-cache", "."))
    assert "a.py:2" in walked.stdout and "pipe.py" not in walked.stdout and walked.exit_code == 1
    named = _in_thread(lambda: run("check", "--no-cache", "pipe.py"))
    assert "pipe.py:1:1: XLA000" in named.stdout and "not a regular file (a FIFO)" in named.stdout
    assert named.exit_code == 2


def test_a_link_to_dev_zero_is_not_read(project):
    (project / "zero.py").symlink_to("/dev/zero")
    (project / "a.py").write_text(CUDA)
    walked = _in_thread(lambda: run("check", "--no-cache", "."))
    assert "zero.py" not in walked.stdout and walked.exit_code == 1
    named = _in_thread(lambda: run("check", "--no-cache", "zero.py"))
    assert "not a regular file (a character device)" in named.stdout and named.exit_code == 2


def test_a_fifo_named_gitignore_does_not_hang_the_walk(project):
    os.mkfifo(project / ".gitignore")
    (project / "a.py").write_text(CUDA)
    assert "a.py:2" in _in_thread(lambda: run("check", "--no-cache", ".")).stdout


def test_the_size_limit_holds_on_what_is_read(project, monkeypatch):
    path = project / "a.py"
    path.write_text(CUDA)
    real_fstat = os.fstat

    def lying_fstat(fd):  # a file that grows after the stat (or a stat that lies)
        info = real_fstat(fd)
        return os.stat_result((*info[:6], 0, *info[7:]))

    real_read = os.read
    read = []

    def counting_read(fd, size):
        data = real_read(fd, size)
        read.append(len(data))
        return data

    monkeypatch.setattr(sourcefile, "MAX_BYTES", 10)
    monkeypatch.setattr(os, "fstat", lying_fstat)
    monkeypatch.setattr(os, "read", counting_read)
    with pytest.raises(sourcefile.SourceError, match="too large"):
        sourcefile.read(path)
    assert 0 < sum(read) <= 11  # it stopped at the limit


# --- 9: messages ---------------------------------------------------------------------------


def test_a_missing_file_says_it_does_not_exist(project):
    result = run("check", "--no-cache", "tpyo.py")
    assert "tpyo.py:1:1: XLA000 cannot read: the file does not exist" in result.stdout
    assert "removed during the run" not in result.stdout and result.exit_code == 2


def test_a_libcst_failure_is_one_short_line(project, monkeypatch):
    import libcst

    from xlalint.fixers import apply

    def parse_fails(*args, **kwargs):
        return libcst.parse_module("x = [" + "1, " * 7000 + " $]\n")

    monkeypatch.setattr(apply, "apply_fixes", parse_fails)
    (project / "a.py").write_text(CUDA)
    result = run("fix", "a.py")
    [line] = [line for line in result.stderr.splitlines() if "a.py" in line]
    assert "ParserSyntaxError" in line and "is not a valid character" in line and len(line) < 400
    assert (project / "a.py").read_text() == CUDA


# --- issue 29: diffs, hooks, configs and files beyond the rewriter ----------------------------


def test_fix_diff_escapes_the_controls_a_terminal_would_act_on(project):
    """Item 8: OSC 52 (writes the clipboard) and CSI 2J (clears the screen) are shown,
    not sent; tab, CRLF and form feed stay, so the diff of such a file still applies."""
    source = "import torch\r\nx = torch.ones(2).cuda()  # \x1b]52;c;aGk=\x07 \x1b[2J\t\x9b\r\n\x0c\r\n"
    (project / "a.py").write_bytes(source.encode())
    result = run("fix", "--diff", "a.py")
    assert result.exit_code == 1
    shown = result.stdout_bytes.decode()  # `stdout` would read CRLF as LF
    assert not any(ch in shown for ch in "\x1b\x07\x9b")
    assert "# \\x1b]52;c;aGk=\\x07 \\x1b[2J\t\\x9b\r\n" in shown
    assert "\n \x0c\r\n" in shown  # the form feed line, as a context line


def test_fix_diff_of_a_plain_file_still_applies(project, tmp_path_factory):
    import shutil
    import subprocess

    if shutil.which("patch") is None:
        pytest.skip("no `patch` program to apply the diff with")
    source = "import torch\n\x0c\nx = torch.ones(2).cuda()\t# tab\n"
    (project / "a.py").write_text(source)
    diff = run("fix", "--diff", "a.py").stdout
    copy = tmp_path_factory.mktemp("copy")
    (copy / "a.py").write_text(source)
    subprocess.run(["patch", "-p1", "-s"], input=diff, text=True, cwd=copy, check=True, timeout=60)
    assert run("fix", "a.py").exit_code == 0
    assert (copy / "a.py").read_text() == (project / "a.py").read_text()


def test_a_config_over_the_size_limit_is_refused_in_one_line(project, monkeypatch):
    """Item 11: an 18 MB config took 23 s and 470 MB; now it is not parsed at all."""
    from xlalint.engine import config

    monkeypatch.setattr(config, "CONFIG_MAX_BYTES", 4096)
    monkeypatch.setattr("tomllib.loads", lambda *a, **k: pytest.fail("an oversized config was parsed"))
    (project / "pyproject.toml").write_text("[tool.xlalint]\nexclude = [" + '"x",' * 1400 + "]\n")
    (project / "a.py").write_text(CUDA)
    result = run("check", "--no-cache", "a.py")
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("xlalint: error: ") and "pyproject.toml: too large for a config file" in line


def test_the_config_size_limit_is_far_above_real_configs():
    from xlalint.engine import config

    assert config.CONFIG_MAX_BYTES >= 1024 * 1024


def test_fix_on_code_too_long_for_the_rewriter_says_so(project):
    """Item 11: 5,000 implicitly concatenated strings parse with Python but not with
    libcst: "too deep or too large to rewrite", exit 2, not an internal error."""
    source = "import torch\nx = (\n" + "".join(f'    "s{i}"\n' for i in range(5000)) + ")\ny = torch.ones(2).cuda()\n"
    (project / "a.py").write_text(source)
    result = run("fix", "--output-format", "concise", "a.py")
    assert result.exit_code == 2
    [line] = [line for line in result.stderr.splitlines() if "a.py" in line]
    assert line == "xlalint: error: a.py: cannot fix: the file is too deep or too large to rewrite"
    assert "XLA104" in result.stdout and (project / "a.py").read_text() == source


@pytest.mark.parametrize("hook", ["xlalint", "xlalint-fix"])
def test_a_file_named_like_an_option_is_a_path_to_the_hooks(project, hook):
    """Item 11: pre-commit runs `entry args file...`; `-rf.py` must be checked as a file."""
    import shlex
    import subprocess
    import sys

    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load((Path(__file__).parents[1] / ".pre-commit-hooks.yaml").read_text())}
    entry = shlex.split(hooks[hook]["entry"])
    assert entry[0] == "xlalint"
    (project / "-rf.py").write_text(CUDA)
    (project / "ok.py").write_text("x = 1\n")
    command = [sys.executable, "-m", "xlalint", *entry[1:], *hooks[hook].get("args", []), "-rf.py", "ok.py"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=project, timeout=120)
    if hook == "xlalint":
        assert done.returncode == 1 and "-rf.py:2:5: XLA104" in done.stdout, done.stderr
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        assert (project / "-rf.py").read_text() == FIXED


def _linked_project(tmp_path, monkeypatch) -> Path:
    outside, project = tmp_path / "outside", tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "x.py").write_text(CUDA)
    (project / "sub" / "real.py").write_text(CUDA)
    (project / "link.py").symlink_to("../outside/x.py")
    (project / "inside_link.py").symlink_to("sub/real.py")
    monkeypatch.chdir(project)
    return project


@pytest.mark.parametrize("marker", [None, "xlalint.toml", ".git"])
def test_fix_does_not_write_through_a_link_out_of_the_project(tmp_path, monkeypatch, marker):
    """Item 4: `fix .` checks `link.py -> ../outside/x.py` but leaves the file outside as
    it is, and says so; a link within the project is fixed (and stays a link)."""
    project = _linked_project(tmp_path, monkeypatch)
    if marker == ".git":
        (project / ".git").mkdir()
    elif marker:
        (project / marker).write_text("")
    result = run("fix", "--no-cache", "--output-format", "concise", ".")
    assert (tmp_path / "outside" / "x.py").read_text() == CUDA
    assert (project / "sub" / "real.py").read_text() == FIXED and (project / "inside_link.py").is_symlink()
    assert result.exit_code == 1
    assert "link.py:2:5: XLA104" in result.stdout
    [line] = [line for line in result.stderr.splitlines() if "link.py" in line]
    assert (
        line == f"warning: link.py: checked, not fixed: a link to a file outside the project ({tmp_path}/outside/x.py)"
    )


def test_add_noqa_does_not_write_through_a_link_out_of_the_project(tmp_path, monkeypatch):
    _linked_project(tmp_path, monkeypatch)
    result = run("check", "--add-noqa", "link.py")
    assert (tmp_path / "outside" / "x.py").read_text() == CUDA
    assert "checked, not fixed: a link to a file outside the project" in result.stderr


def test_a_project_reached_through_a_linked_folder_is_still_written(tmp_path, monkeypatch):
    real = tmp_path / "real_project"
    real.mkdir()
    (real / "a.py").write_text(CUDA)
    (tmp_path / "alias").symlink_to(real)
    monkeypatch.chdir(tmp_path / "alias")
    assert run("fix", ".").exit_code == 0
    assert (real / "a.py").read_text() == FIXED


def _unreadable(monkeypatch, folder: Path) -> None:
    """``folder`` as a user without permission sees it (the tests run as root, who reads
    everything): listing it, or looking at a path under it, fails with EACCES."""
    real_scandir, real_stat = os.scandir, os.stat
    under = str(folder.absolute())

    def denied(path) -> bool:
        text = os.path.abspath(os.fsdecode(path))
        return text == under or text.startswith(under + os.sep)

    def scandir(path="."):
        if denied(path):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_scandir(path)

    def stat(path, *args, **kwargs):
        if not isinstance(path, int) and os.path.abspath(os.fsdecode(path)).startswith(under + os.sep):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "stat", stat)


def test_an_unreadable_folder_in_a_walk_is_an_error(project, monkeypatch):
    """Item 5: not "No Python files found", exit 0 (CI would pass unchecked)."""
    (project / "p" / "sub").mkdir(parents=True)
    (project / "p" / "sub" / "a.py").write_text(CUDA)
    (project / "p" / "b.py").write_text("x = 1\n")
    _unreadable(monkeypatch, project / "p" / "sub")
    result = run("check", "--no-cache", "--output-format", "concise", "p")
    assert result.exit_code == 2
    assert result.stdout.splitlines()[0] == "p/sub:1:1: XLA000 cannot read the folder: Permission denied"
    assert "No Python files found" not in result.stderr


def test_a_file_in_an_unreadable_folder_is_one_line(project, monkeypatch):
    (project / "p" / "sub").mkdir(parents=True)
    (project / "p" / "sub" / "a.py").write_text(CUDA)
    _unreadable(monkeypatch, project / "p" / "sub")
    result = CliRunner().invoke(app, ["check", "--no-cache", "--output-format", "concise", "p/sub/a.py"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert result.stdout.splitlines()[0] == "p/sub/a.py:1:1: XLA000 cannot read: Permission denied"


def test_a_path_over_path_max_is_one_line(project):
    long_path = "a/" * 3000 + "x.py"
    result = CliRunner().invoke(app, ["check", "--no-cache", "--output-format", "concise", long_path])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert result.stdout.splitlines()[0] == f"{long_path}:1:1: XLA000 cannot read: File name too long"


PATH_MAX = os.pathconf("/", "PC_PATH_MAX")  # 4096 on Linux, the final NUL included


def make_folders_to(top: Path, length: int) -> Path:
    """Folders under ``top`` down to one whose absolute path is ``length`` characters,
    whatever the length of ``top``'s own path; gives the deepest."""
    left = length - len(str(top))  # each level adds a separator and a name
    levels = -(-left // 201)  # names of at most 200 characters
    letters = left - levels
    names = ["d" * (letters // levels + (i < letters % levels)) for i in range(levels)]
    deepest = top.joinpath(*names)
    deepest.mkdir(parents=True)
    assert len(str(deepest)) == length
    return deepest


def test_a_folder_deeper_than_path_max_in_a_walk_is_an_error(project):
    """Folders whose absolute paths end within a few characters of PATH_MAX, however
    long the path of the test's own folder: each can be listed, but its ``.git``,
    ``pyproject.toml``, ``.gitignore`` or an imported module's ``__init__.py`` is
    over PATH_MAX (Path.exists raises there on Python 3.11), and the folder in it
    cannot be listed. Each is one XLA000 line and exit 2, never a traceback."""
    longest = PATH_MAX - 1
    lengths = range(longest - 20, longest + 1)
    for length in lengths:
        deepest = make_folders_to(project / "top" / f"c{length}", length)
        folder = os.open(deepest, os.O_RDONLY)
        try:
            # A folder in it whose path is over PATH_MAX (made relative to its folder).
            os.mkdir("e" * (PATH_MAX - length), dir_fd=folder)
        finally:
            os.close(folder)
        if length + len("/m.py") <= longest:
            (deepest / "m.py").write_text("import helper\n\nhelper.run()\n")
    (project / "top" / "ok.py").write_text("x = 1\n")
    result = run("check", "--no-cache", "--output-format", "concise", ".")
    assert result.exit_code == 2
    lines = [line for line in result.stdout.splitlines() if "XLA000" in line]
    assert all(line.endswith(":1:1: XLA000 cannot read the folder: File name too long") for line in lines), lines
    assert sorted(line.split("/")[1] for line in lines) == sorted(f"c{length}" for length in lengths)
