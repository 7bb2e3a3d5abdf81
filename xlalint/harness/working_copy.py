"""Each run of ``xlalint run --compare`` in its own copy of the working directory.

The original and the fixed script used to run in the user's working directory, one
after the other: what the first wrote changed the second (a checkpoint made the fixed
run resume halfway; a sample folder it created made ``os.makedirs`` fail). Then each
run had a copy whose files were links to the user's, and a script that appended to a
file (``open("data.txt", "a")``, ``r+``, a log, a checkpoint written in place) wrote
into the user's file, twice. Now each run starts from the working directory as it
was, in a copy of its own that nothing it writes leads out of:

- its folders are made anew and its files are copies of the user's: copy-on-write
  clones (``FICLONE``) where the filesystem has them, which cost no data and no time;
  real copies elsewhere, up to ``MAX_COPY_BYTES`` in all per run;
- past that budget a file is a symbolic link to the user's (a dataset is not copied
  whole); the report says how many and that writing into them changes the user's
  files;
- the user's symbolic links are made again as they are (a relative one resolves in
  the copy; one into the working directory by an absolute path points to its place in
  the copy);
- a tree of more than ``MAX_ENTRIES`` entries is copied down to that many, and what
  is deeper is linked whole (a link to the folder: files made inside it are the
  user's); the report says so;
- a virtual environment (a folder holding ``pyvenv.cfg`` or ``conda-meta``) and git's
  ``.git`` are linked whole from the start: a script reads its packages, it does not
  write them, and a project's ``.venv`` (gigabytes, tens of thousands of files) cost
  seconds of copying per run and the whole copy budget; the report names them.

Paths the script builds from its own ``__file__`` point into the user's folder, not
the copy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections import deque
from dataclasses import dataclass
from pathlib import Path

#: Folders and files made in a copy at most; deeper folders are linked whole.
MAX_ENTRIES = 20_000
#: Bytes of real copies per run at most (copy-on-write clones do not count): past it,
#: files are linked to the user's.
MAX_COPY_BYTES = 1 << 30
#: ``ioctl(dest, FICLONE, source)``: Linux's copy-on-write clone of a whole file (btrfs,
#: XFS, bcachefs, overlayfs on those); ``_IOW(0x94, 9, int)``.
FICLONE = 0x40049409
#: errno values that mean "this filesystem (or pair of them) has no clones".
_NO_CLONES = {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EPERM}


@dataclass(frozen=True)
class WorkingCopy:
    path: Path
    #: Folders linked whole (the entry budget ran out): files made in them are the user's.
    linked_folders: int = 0
    #: Files linked to the user's (the copy budget ran out) and their size in bytes.
    linked_files: int = 0
    linked_bytes: int = 0
    #: Environments and git stores linked whole (see ``is_tool_folder``), by name.
    linked_tools: tuple[str, ...] = ()


class _Copier:
    """Copies files, by clone while the filesystem takes them, then by bytes in budget."""

    def __init__(self, max_copy_bytes: int) -> None:
        self.budget = max_copy_bytes
        self.clones = True  # until the filesystem says it has none
        self.linked_files = 0
        self.linked_bytes = 0

    def copy(self, source: os.DirEntry, target: Path) -> None:
        size = source.stat().st_size
        if self.clones and _clone(source.path, target):
            shutil.copystat(source.path, target)
            return
        self.clones = False
        if size > self.budget:
            self.linked_files += 1
            self.linked_bytes += size
            target.symlink_to(source.path)
            return
        self.budget -= size
        shutil.copy2(source.path, target)


def _clone(source: str, target: Path) -> bool:
    """``target`` made a copy-on-write clone of ``source``; False (nothing left) when
    the filesystem cannot."""
    try:
        import fcntl
    except ImportError:  # not on this platform
        return False
    with open(source, "rb") as reading:
        made = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            fcntl.ioctl(made, FICLONE, reading.fileno())
        except OSError as error:
            os.close(made)
            os.unlink(target)
            if error.errno in _NO_CLONES:
                return False
            raise
        os.close(made)
    return True


#: A file or folder whose presence makes a folder a Python environment.
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")


def is_tool_folder(folder: os.DirEntry) -> bool:
    """``folder`` is git's store or a Python environment: linked whole, not copied."""
    if folder.name == ".git":
        return True
    return any(os.path.lexists(os.path.join(folder.path, marker)) for marker in ENVIRONMENT_MARKERS)


def make_working_copy(
    source: Path, target: Path, max_entries: int = MAX_ENTRIES, max_copy_bytes: int = MAX_COPY_BYTES
) -> WorkingCopy:
    """A copy of ``source`` at ``target``: folders made, files copied, breadth first."""
    target.mkdir(parents=True)
    made_here = os.stat(target)
    copier = _Copier(max_copy_bytes)
    entries, linked_folders, linked_tools = 0, 0, []
    pending = deque([(source, target)])
    while pending:
        folder, copy = pending.popleft()
        try:
            children = list(os.scandir(folder))
        except OSError:
            continue  # unreadable: the copy has it empty, as the script would find nothing there
        for child in children:
            made = copy / child.name
            entries += 1
            try:
                if child.inode() == made_here.st_ino and child.stat(follow_symlinks=False).st_dev == made_here.st_dev:
                    continue  # the copy itself (the working directory holds the temporary folder)
                if child.is_symlink():
                    made.symlink_to(_link_in_copy(child.path, source, target))
                elif child.is_dir(follow_symlinks=False) and is_tool_folder(child):
                    linked_tools.append(os.path.relpath(child.path, source))
                    made.symlink_to(child.path)
                elif child.is_dir(follow_symlinks=False) and entries <= max_entries:
                    made.mkdir()
                    pending.append((Path(child.path), made))
                elif child.is_dir(follow_symlinks=False):
                    linked_folders += 1
                    made.symlink_to(child.path)
                elif child.is_file(follow_symlinks=False):
                    copier.copy(child, made)
                # a socket, FIFO or device file is left out: a run must not write to the user's
            except OSError:
                with contextlib.suppress(OSError):
                    made.unlink()  # half made (unreadable, or the disk is full): left out
                continue
    return WorkingCopy(target, linked_folders, copier.linked_files, copier.linked_bytes, tuple(sorted(linked_tools)))


def _link_in_copy(link: str, source: Path, target: Path) -> str:
    """What the copy of the user's symbolic link ``link`` points to: the same text when
    relative (it resolves in the copy as in the user's folder, or outside it as
    before), the same place in the copy when an absolute path into ``source``."""
    text = os.readlink(link)
    if not os.path.isabs(text):
        return text
    with contextlib.suppress(ValueError):
        return str(target / Path(text).relative_to(source))
    return text


def describe(copies: list[WorkingCopy], source: Path) -> str:
    """The report's line on where the runs ran."""
    text = f"each run had its own copy of the working directory {source}: what one run wrote, the other did not see"
    linked_files = max((copy.linked_files for copy in copies), default=0)
    if linked_files:
        size = max(copy.linked_bytes for copy in copies) / (1 << 30)
        text += (
            f"; past {MAX_COPY_BYTES >> 20} MiB of copies, {linked_files} files ({size:.1f} GiB) were linked, "
            "not copied (a run writing into them changes your files)"
        )
    tools = max((copy.linked_tools for copy in copies), key=len, default=())
    if tools:
        shown = ", ".join(tools[:3]) + (f" and {len(tools) - 3} more" if len(tools) > 3 else "")
        text += f"; environments and git stores were linked, not copied ({shown})"
    linked = max((copy.linked_folders for copy in copies), default=0)
    if linked:
        text += f"; past {MAX_ENTRIES} entries, {linked} folders were linked whole (files made in them are shared)"
    return text
