"""Where the check cache is, for ``xlalint clean`` (as ``ruff clean``): a
``.xlalint_cache`` folder in the working folder, in any folder below it, and at the root
of the project the working folder is in (the nearest folder above it with a
``pyproject.toml``, an ``xlalint.toml`` or a ``.git``; none above when there is none)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

CACHE_DIR_NAME = ".xlalint_cache"
PROJECT_MARKERS = ("pyproject.toml", "xlalint.toml", ".git")
# Never walked for caches: version control data.
SKIPPED = frozenset({".git", ".hg", ".svn"})


def cache_folders(start: Path) -> Iterator[Path]:
    """The cache folders (or links named like one) at and below ``start`` and at the
    project root above it. Links are not followed."""
    if not _is_project_root(start):  # else nothing above start is this project's
        root = next((folder for folder in start.parents if _is_project_root(folder)), None)
        if root is not None and _is_cache(root / CACHE_DIR_NAME):
            yield root / CACHE_DIR_NAME
    for root, dirs, files in os.walk(start):
        # os.walk lists a link to a folder among ``dirs`` without entering it, and a
        # dangling link among ``files``.
        if CACHE_DIR_NAME in dirs or (CACHE_DIR_NAME in files and (Path(root) / CACHE_DIR_NAME).is_symlink()):
            yield Path(root) / CACHE_DIR_NAME
        dirs[:] = [d for d in dirs if d != CACHE_DIR_NAME and d not in SKIPPED]


def _is_project_root(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in PROJECT_MARKERS)


def _is_cache(path: Path) -> bool:
    return path.is_symlink() or path.is_dir()


def remove(path: Path) -> None:
    """Remove a cache folder; a link is removed, never what it points to."""
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)
