"""Cache entries written by another user are not trusted (issue 40 §4): in a shared,
world-writable folder an entry edited by `nobody` (findings emptied) made root's
`check` print "All checks passed!". As git's safe.directory: entries not owned by the
current user are misses, and a cache folder another user owns or may write in is not
used (one warning)."""

from __future__ import annotations

import json
import os
import pwd

import pytest
from typer.testing import CliRunner

from xlalint.cli import app

CUDA = "import torch\n\nx = torch.ones(3).cuda()\n"
FINDING = "a.py:3:5: XLA104"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(CUDA)
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\n")
    return tmp_path


def check():
    return CliRunner().invoke(app, ["check", "a.py", "--output-format", "concise"], catch_exceptions=False)


def emptied_entry(project):
    """The file's cache entry, its findings emptied (still a well-formed entry)."""
    [entry] = [p for p in (project / ".xlalint_cache").glob("??/*") if not p.name.startswith(".")]
    data = json.loads(entry.read_bytes())
    data["findings"] = []
    entry.write_text(json.dumps(data, separators=(",", ":")))
    return entry


NOBODY = pwd.getpwnam("nobody").pw_uid


def test_an_entry_another_user_wrote_is_not_used(project):
    assert FINDING in check().stdout
    entry = emptied_entry(project)
    os.chown(entry, NOBODY, -1)
    second = check()
    assert FINDING in second.stdout and second.exit_code == 1
    assert "warning" not in second.stderr
    assert os.stat(entry).st_uid == 0  # rewritten as this user's


@pytest.mark.parametrize("how", ["writable by others", "owned by another user"])
def test_a_cache_folder_others_may_write_in_is_not_used(project, how):
    check()
    emptied_entry(project)  # as if planted by another user (owned by this one)
    folder = project / ".xlalint_cache"
    if how == "writable by others":
        os.chmod(folder, 0o777)
    else:
        os.chown(folder, NOBODY, -1)
    result = check()
    assert FINDING in result.stdout and result.exit_code == 1
    reason = "is writable by other users" if how == "writable by others" else "is owned by another user"
    assert result.stderr == f"warning: the cache folder {folder} {reason}: checked without it (as --no-cache)\n"
