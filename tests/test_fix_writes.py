"""How `fix` writes (issue 22 item 4): the owner and group stay, hard links stay
linked, and a file with one link is still replaced atomically."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.linter import source as sourcefile

CUDA = "import torch\nx = torch.ones(2).cuda()\n"
FIXED = "import torch\nimport torch_xla\n\nx = torch.ones(2).to(torch_xla.device())\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another owner takes root")
def test_fix_keeps_the_owner_and_group(project):
    path = project / "a.py"
    path.write_text(CUDA)
    os.chown(path, 4321, 8765)
    os.chmod(path, 0o640)
    assert run("fix", "a.py").exit_code == 0
    info = path.stat()
    assert path.read_text() == FIXED
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (4321, 8765, 0o640)


def test_fix_keeps_hard_links_linked(project):
    path, other = project / "a.py", project / "b_link.py"
    path.write_text(CUDA)
    os.link(path, other)
    inode = path.stat().st_ino
    assert run("fix", "a.py").exit_code == 0
    assert path.read_text() == other.read_text() == FIXED
    assert path.stat().st_ino == other.stat().st_ino == inode
    assert path.stat().st_nlink == 2
    assert [p.name for p in project.iterdir() if p.name.startswith(".")] == []  # no temp file


def test_a_hard_linked_file_changed_meanwhile_is_not_written(project, monkeypatch):
    path = project / "a.py"
    path.write_text(CUDA)
    os.link(path, project / "b_link.py")
    original = sourcefile.read(path)
    path.write_text(CUDA + "# edited meanwhile\n")
    with pytest.raises(sourcefile.SourceError, match="changed while"):
        sourcefile.write_atomic(path, original, FIXED)
    assert path.read_text().endswith("# edited meanwhile\n")


def test_a_hard_linked_file_gets_shorter_text_without_leftovers(project):
    path = project / "a.py"
    long_text = CUDA + "#" * 500 + "\n"
    path.write_text(long_text)
    os.link(path, project / "b_link.py")
    sourcefile.write_atomic(path, sourcefile.read(path), "x = 1\n")
    assert path.read_bytes() == b"x = 1\n"


def test_a_single_link_file_is_still_replaced_by_a_rename(project):
    path = project / "a.py"
    path.write_text(CUDA)
    inode = path.stat().st_ino
    assert run("fix", "a.py").exit_code == 0
    assert path.read_text() == FIXED and path.stat().st_ino != inode
