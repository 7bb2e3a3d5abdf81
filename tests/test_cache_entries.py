"""Cache entries (issue 22 items 10 and 12): each is tied to the file it describes
(path, size, time, content hash; findings about that file, within its lines), the
folder is never followed through a link, it sits at the project root, and a warm rerun
neither hashes nor reads unchanged files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine import cache, findings_json
from xlalint.engine import source as sourcefile

CUDA = "import torch\nx = torch.ones(2).cuda()\n"
CLEAN = "import torch\nx = torch.ones(2)\n"
AN_HOUR_AGO = time.time() - 3600


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # the project root
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def write_old(path: Path, text: str) -> None:
    """A file last changed an hour ago: its time can be trusted (not within the tick)."""
    path.write_text(text)
    os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))


def the_entry(root: Path) -> Path:
    [entry] = [p for p in (root / ".xlalint_cache").glob("??/*") if not p.name.startswith(".")]
    return entry


def rewrite(entry: Path, change) -> None:
    data = json.loads(entry.read_bytes())
    change(data)
    entry.write_text(json.dumps(data))


def test_an_entry_says_which_file_it_describes(project):
    write_old(project / "a.py", CUDA)
    run("check", "a.py")
    stamp = json.loads(the_entry(project).read_bytes())["file"]
    info = (project / "a.py").stat()
    assert stamp["path"] == "a.py" and (stamp["size"], stamp["mtime_ns"]) == (info.st_size, info.st_mtime_ns)
    assert stamp["sha256"] == sourcefile.Fingerprint.of(info, CUDA.encode()).sha256


def test_findings_about_another_file_are_a_miss(project):
    write_old(project / "a.py", CUDA)
    expected = run("check", "a.py")

    def elsewhere(data):
        data["findings"][0]["path"] = "/etc/passwd"

    rewrite(the_entry(project), elsewhere)
    result = run("check", "a.py")
    assert "/etc/passwd" not in result.stdout and result.stdout == expected.stdout


def test_an_entry_for_another_path_is_a_miss(project):
    write_old(project / "a.py", CUDA)
    expected = run("check", "a.py")
    rewrite(the_entry(project), lambda data: data["file"].update(path="b.py"))
    assert run("check", "a.py").stdout == expected.stdout


@pytest.mark.parametrize("where", [("span", "col"), ("span", "end_col")])
def test_a_column_beyond_its_line_is_a_miss(project, where):
    write_old(project / "a.py", CUDA)
    expected = run("check", "a.py")

    def beyond(data):
        data["findings"][0][where[0]][where[1]] = 200

    rewrite(the_entry(project), beyond)
    assert run("check", "a.py").stdout == expected.stdout


def test_an_entry_that_hides_findings_of_other_content_is_a_miss(project):
    """Same size, another time: the content hash decides, and it differs."""
    write_old(project / "a.py", CLEAN + "#" * 7 + "\n")  # as long as CUDA
    assert run("check", "a.py").exit_code == 0
    write_old(project / "a.py", CUDA)
    os.utime(project / "a.py", (AN_HOUR_AGO + 5, AN_HOUR_AGO + 5))
    result = run("check", "a.py")
    assert result.exit_code == 1 and "XLA104" in result.stdout


def test_a_touched_file_is_hashed_once_then_answered_by_its_time(project, monkeypatch):
    write_old(project / "a.py", CUDA)
    first = run("check", "a.py")
    os.utime(project / "a.py", (AN_HOUR_AGO + 5, AN_HOUR_AGO + 5))  # `touch`: same content
    assert run("check", "a.py").stdout == first.stdout
    assert json.loads(the_entry(project).read_bytes())["file"]["mtime_ns"] == (project / "a.py").stat().st_mtime_ns


def test_a_warm_rerun_hashes_no_unchanged_file_and_reads_only_those_with_findings(project, monkeypatch):
    write_old(project / "a.py", CUDA)
    for i in range(5):
        write_old(project / f"clean{i}.py", CLEAN)
    first = run("check", ".")
    hashed, read = [], []
    real_sha256, real_read = cache.hashlib.sha256, sourcefile.read_file
    monkeypatch.setattr(cache.hashlib, "sha256", lambda *data: hashed.append(data) or real_sha256(*data))
    monkeypatch.setattr(sourcefile, "read_file", lambda path: read.append(Path(path).name) or real_read(path))
    warm = run("check", ".")
    assert (warm.exit_code, warm.stdout) == (first.exit_code, first.stdout)
    assert [data for data in hashed if data] == []  # the entries' keys only: no file's content
    assert read == ["a.py"]  # its findings are checked against its lines; clean files are not read


def test_a_fresh_file_is_not_trusted_by_its_time(project):
    """Written within the clock tick of its entry, an edit of the same size could go
    unseen: such an entry keeps no time, and the next run compares content."""
    (project / "a.py").write_text(CUDA)
    run("check", "a.py")
    assert json.loads(the_entry(project).read_bytes())["file"]["mtime_ns"] == 0


def test_a_cache_folder_that_is_a_link_is_neither_written_nor_read(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    write_old(project / "a.py", CUDA)
    run("check", "a.py")
    planted = the_entry(project)
    rewrite(planted, lambda data: data.update(findings=[]))  # an entry that hides the finding
    (elsewhere / planted.parent.name).mkdir()
    os.replace(planted, elsewhere / planted.parent.name / planted.name)
    before = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    for path in sorted((project / ".xlalint_cache").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (project / ".xlalint_cache").rmdir()
    (project / ".xlalint_cache").symlink_to(elsewhere, target_is_directory=True)
    result = run("check", "a.py")
    assert result.exit_code == 1 and "XLA104" in result.stdout  # the planted entry was not read
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == before  # nothing written there


def test_an_entry_that_is_a_link_is_not_followed(project, tmp_path_factory):
    write_old(project / "a.py", CUDA)
    run("check", "a.py")
    entry = the_entry(project)
    target = tmp_path_factory.mktemp("elsewhere") / "entry"
    rewrite(entry, lambda data: data.update(findings=[]))
    os.replace(entry, target)
    entry.symlink_to(target)
    assert run("check", "a.py").exit_code == 1


def test_the_cache_is_at_the_project_root(project):
    (project / "pyproject.toml").write_text("[tool.xlalint]\n")
    (project / "src" / "deep").mkdir(parents=True)
    write_old(project / "src" / "deep" / "a.py", CUDA)
    os.chdir(project / "src" / "deep")
    run("check", "a.py")
    assert (project / ".xlalint_cache").is_dir()
    assert not (project / "src" / "deep" / ".xlalint_cache").exists()


def test_without_a_config_the_repository_root_holds_the_cache(project):
    (project / "src").mkdir()
    write_old(project / "src" / "a.py", CUDA)
    os.chdir(project / "src")
    run("check", "a.py")
    assert (project / ".xlalint_cache").is_dir() and not (project / "src" / ".xlalint_cache").exists()


def test_entries_are_json_data_with_a_stamp_not_pickles(project):
    write_old(project / "a.py", CUDA)
    run("check", "a.py")
    data = the_entry(project).read_bytes()
    stamp, findings = findings_json.loads(data, the_entry(project).name)
    assert stamp.path == "a.py" and [f.code for f in findings] == ["XLA104"]
    assert not data.startswith(b"\x80")  # a pickle's protocol byte
