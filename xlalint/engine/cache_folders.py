"""Where the check cache is, for ``xlalint clean`` (as ``ruff clean``): a
``.xlalint_cache`` folder in the working folder, in any folder below it, and at the
project root that ``check`` writes it to (``cache.project_root``); and the two files
that keep a cache folder out of git and backups (``.gitignore``, ``CACHEDIR.TAG``).

Those two are written whole or not at all (a temporary file, then a link under their
name that fails if one is there): a folder made on a full disk used to keep an empty
``.gitignore`` and no ``CACHEDIR.TAG`` for good, and ``git add -A`` took its entries.
One found incomplete (empty, cut short, missing) is written again."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

CACHE_DIR_NAME = ".xlalint_cache"
# Never walked for caches: version control data.
SKIPPED = frozenset({".git", ".hg", ".svn"})
#: The files every cache folder has, and what they hold.
GITIGNORE = "# Automatically created by xlalint.\n*\n"
CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n"
TAGS = {".gitignore": GITIGNORE, "CACHEDIR.TAG": CACHEDIR_TAG}


def cache_folders(start: Path, project_root: Path) -> Iterator[Path]:
    """The cache folders (or links named like one) at and below ``start`` and at
    ``project_root``. Links are not followed."""
    if project_root != start and _is_cache(project_root / CACHE_DIR_NAME):
        yield project_root / CACHE_DIR_NAME
    for root, dirs, files in os.walk(start):
        # os.walk lists a link to a folder among ``dirs`` without entering it, and a
        # dangling link among ``files``.
        if CACHE_DIR_NAME in dirs or (CACHE_DIR_NAME in files and os.path.islink(Path(root) / CACHE_DIR_NAME)):
            yield Path(root) / CACHE_DIR_NAME
        dirs[:] = [d for d in dirs if d != CACHE_DIR_NAME and d not in SKIPPED]


def _is_cache(path: Path) -> bool:
    return os.path.islink(path) or os.path.isdir(path)  # never raise (Path's do over PATH_MAX)


def remove(path: Path) -> None:
    """Remove a cache folder; a link is removed, never what it points to."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


def write_tags(folder: Path) -> None:
    """Give the cache folder ``folder`` its ``.gitignore`` and ``CACHEDIR.TAG``, each
    whole (a missing or incomplete one is written again; a complete one, or anything
    that is not a regular file, is left). Raises ``OSError`` (a full disk)."""
    for name, text in TAGS.items():
        path = folder / name
        if not _incomplete(path, text):
            continue
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, text.encode())
                os.fsync(fd)  # a full disk says so here, not after the rename
            finally:
                os.close(fd)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _incomplete(path: Path, text: str) -> bool:
    """Missing, or a regular file holding less than ``text`` (cut short by a full disk)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # a link or something odd planted there: not ours to replace
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 4096:
            return False
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    return text.encode().startswith(data)  # empty or a prefix: cut short
