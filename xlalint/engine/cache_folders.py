"""Where the check cache is, for ``xlalint clean`` (as ``ruff clean``): a
``.xlalint_cache`` folder in the working folder, in any folder below it, and at the
project root that ``check`` writes it to (``cache.project_root``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

CACHE_DIR_NAME = ".xlalint_cache"
# Never walked for caches: version control data.
SKIPPED = frozenset({".git", ".hg", ".svn"})


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
