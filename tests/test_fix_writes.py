"""How `fix` writes (issue 22 item 4): the owner and group stay, hard links stay
linked, and a file with one link is still replaced atomically."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine import source as sourcefile

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


# --- issue 29 item 1: a full disk loses nothing; attributes and ACLs stay ---------------------

PAGE = 4096


@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    """A 1 MiB tmpfs (root only), the current folder; unmounted afterwards."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small file system takes root")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    monkeypatch.chdir(mount)
    try:
        yield mount
    finally:
        monkeypatch.chdir(tmp_path)
        subprocess.run(["umount", str(mount)], check=True)


def fill(disk) -> None:
    with open(disk / "filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * PAGE)
        except OSError as exc:
            assert exc.errno == 28  # ENOSPC


def fixable_of_whole_pages(size: int) -> bytes:
    """A fixable file of exactly ``size`` bytes (whole pages: the longer fixed text
    needs one more)."""
    head = CUDA.encode()
    body = (b"#" * (PAGE - 1) + b"\n") * ((size - len(head)) // PAGE)  # few lines: a quick fix
    return head + body + b"#" * (size - len(head) - len(body) - 1) + b"\n"


@pytest.mark.parametrize("linked", [True, False], ids=["hard-linked", "one-link"])
def test_a_full_disk_leaves_the_original_bytes(small_disk, linked):
    original = fixable_of_whole_pages(90 * PAGE)  # 360 KiB
    (small_disk / "big.py").write_bytes(original)
    if linked:
        os.link(small_disk / "big.py", small_disk / "hard.py")
    fill(small_disk)
    result = run("fix", "big.py")
    assert result.exit_code == 2
    assert "big.py: not written: No space left on device" in result.stderr
    assert (small_disk / "big.py").read_bytes() == original
    if linked:
        assert (small_disk / "hard.py").stat().st_ino == (small_disk / "big.py").stat().st_ino
    assert sorted(p.name for p in small_disk.iterdir()) == sorted(
        ["big.py", "filler", *(["hard.py"] if linked else [])]
    )
    (small_disk / "filler").unlink()
    assert run("fix", "big.py").exit_code == 0  # with room, it is fixed (still linked)
    assert (small_disk / "big.py").read_bytes().startswith(FIXED.encode())
    if linked:
        assert (small_disk / "hard.py").read_bytes() == (small_disk / "big.py").read_bytes()


def test_a_failed_in_place_write_puts_the_original_back(project, monkeypatch):
    """Wherever a write fails after the reservation (an I/O error, a copy-on-write file
    system out of space), the original bytes are written back."""
    path = project / "a.py"
    path.write_text(CUDA + "# more\n" * 100)
    os.link(path, project / "b_link.py")
    original = path.read_bytes()
    real_pwrite, calls = os.pwrite, []

    def pwrite_fails_midway(fd, data, offset):
        calls.append(offset)
        if len(calls) == 1:
            real_pwrite(fd, bytes(data[:50]), offset)
            raise OSError(5, "Input/output error")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite_fails_midway)
    result = run("fix", "a.py")
    assert result.exit_code == 2 and "not written: Input/output error" in result.stderr
    assert path.read_bytes() == original


def test_a_refused_reservation_leaves_the_file_as_it_was(project, monkeypatch):
    path = project / "a.py"
    path.write_text(CUDA)
    os.link(path, project / "b_link.py")

    def no_space(fd, offset, size):
        os.ftruncate(fd, size // 2 + 20)  # as glibc's emulation may leave it: grown, then out of room
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space, raising=False)
    result = run("fix", "a.py")
    assert result.exit_code == 2 and "not written: No space left on device" in result.stderr
    assert path.read_text() == CUDA


def _acl_with_user(uid: int) -> bytes:
    """A POSIX ACL as the kernel stores it: owner rw, user ``uid`` r, group r, mask r, other r."""
    import struct

    entries = [
        (0x01, 6, 0xFFFFFFFF),
        (0x02, 4, uid),
        (0x04, 4, 0xFFFFFFFF),
        (0x10, 4, 0xFFFFFFFF),
        (0x20, 4, 0xFFFFFFFF),
    ]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *entry) for entry in entries)


def test_fix_keeps_extended_attributes_and_acls(project):
    path = project / "a.py"
    path.write_text(CUDA)
    try:
        os.setxattr(path, "user.origin", b"generated-by-hand")
    except OSError as exc:
        pytest.skip(f"no user extended attributes on {project}: {exc.strerror}")
    acl = _acl_with_user(4242)
    try:
        os.setxattr(path, "system.posix_acl_access", acl)
    except OSError:
        acl = None  # a file system without ACLs: the user attribute is still tested
    inode = path.stat().st_ino
    assert run("fix", "a.py").exit_code == 0
    assert path.read_text() == FIXED and path.stat().st_ino != inode  # the rename path
    assert os.getxattr(path, "user.origin") == b"generated-by-hand"
    if acl is not None:
        assert os.getxattr(path, "system.posix_acl_access") == acl


def test_an_attribute_the_new_file_cannot_have_keeps_the_file_itself(project, monkeypatch):
    path = project / "a.py"
    path.write_text(CUDA)
    try:
        os.setxattr(path, "user.origin", b"x")
    except OSError as exc:
        pytest.skip(f"no user extended attributes on {project}: {exc.strerror}")

    def refused(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "setxattr", refused)
    inode = path.stat().st_ino
    assert run("fix", "a.py").exit_code == 0
    assert path.read_text() == FIXED and path.stat().st_ino == inode
    assert os.getxattr(path, "user.origin") == b"x"
    assert [p.name for p in project.iterdir() if p.name.startswith(".")] == []
