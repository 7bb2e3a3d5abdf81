"""A cache folder's `.gitignore` and `CACHEDIR.TAG` (issue 40 §6): made on a full disk,
the folder kept an empty `.gitignore` and no `CACHEDIR.TAG` for good, so its entries
ended up in `git add -A`. Both are written whole or not at all, and repaired."""

from __future__ import annotations

import errno

import pytest
from support import run_cli
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine import cache_folders

GITIGNORE = "# Automatically created by xlalint.\n*\n"
CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n"
CUDA = "import torch\n\nx = torch.ones(3).cuda()\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(CUDA)
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\n")
    return tmp_path


def check():
    result = CliRunner().invoke(app, ["check", "a.py"], catch_exceptions=False)
    assert "XLA104" in result.stdout
    return result


def entries(project):
    return [p for p in (project / ".xlalint_cache").glob("??/*") if not p.name.startswith(".")]


def test_tags_cut_short_are_repaired(project):
    folder = project / ".xlalint_cache"
    folder.mkdir()
    (folder / ".gitignore").write_text("")  # as a full disk left it
    check()
    assert (folder / ".gitignore").read_text() == GITIGNORE
    assert (folder / "CACHEDIR.TAG").read_text() == CACHEDIR_TAG
    assert len(entries(project)) == 1


def test_on_a_full_disk_no_empty_tag_and_no_entry_are_left(project, monkeypatch):
    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(cache_folders.os, "fsync", full_disk)
        check()
    folder = project / ".xlalint_cache"
    assert sorted(p.name for p in folder.iterdir()) == []  # nothing half written, no entry git would take
    check()
    assert (folder / ".gitignore").read_text() == GITIGNORE and len(entries(project)) == 1


def test_a_users_own_complete_gitignore_is_left_as_it_is(project):
    folder = project / ".xlalint_cache"
    folder.mkdir()
    (folder / ".gitignore").write_text("*\n# mine\n")
    check()
    assert (folder / ".gitignore").read_text() == "*\n# mine\n"
    assert (folder / "CACHEDIR.TAG").read_text() == CACHEDIR_TAG


def test_a_warm_cache_with_a_tag_cut_short_is_repaired_by_a_check_that_writes_no_entry(project):
    check()
    folder = project / ".xlalint_cache"
    (folder / ".gitignore").write_text("")
    (folder / "CACHEDIR.TAG").unlink()
    done = run_cli("check", "a.py", cwd=project)  # every answer from the cache
    assert done.returncode == 1 and b"XLA104" in done.stdout
    assert (folder / ".gitignore").read_text() == GITIGNORE
    assert (folder / "CACHEDIR.TAG").read_text() == CACHEDIR_TAG
