"""Finding the files to check: directories are walked for ``*.py`` and ``*.ipynb`` files, honouring
``.gitignore`` files (``engine/gitignore.py``: linear in the path, whatever the pattern), the
default excludes and ``exclude``.

Files named explicitly are always checked, as in ruff, unless ``force_exclude``
(what the pre-commit hooks pass, since pre-commit names every file itself).
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from xlalint.engine.config import DEFAULT_EXCLUDE, ConfigFinder, Settings
from xlalint.engine.source import MAX_BYTES, SourceError, read_regular

if TYPE_CHECKING:
    from xlalint.engine.gitignore import IgnoreSpec

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")


@functools.lru_cache(maxsize=1024)  # asked once per file found, for a few folders
def _git_root(start: Path) -> Path | None:
    # os.path.exists, not Path.exists: on Python 3.11 the latter raises for a path over
    # PATH_MAX (a folder the walk can list whose ``.git`` is one name too long).
    for folder in (start, *start.parents):
        if os.path.exists(folder / ".git"):
            return folder
    return None


def _load_ignore(folder: Path) -> IgnoreSpec | None:
    lines: list[str] = []
    files = [folder / ".gitignore", folder / ".ignore"]
    if os.path.isdir(folder / ".git"):  # never raises (Path.is_dir does over PATH_MAX)
        files.append(folder / ".git" / "info" / "exclude")
    for file in files:
        # Only regular files, of a sane size: a FIFO named .gitignore must not hang the walk.
        with contextlib.suppress(OSError, SourceError):
            data = read_regular(file, MAX_BYTES)
            lines += data.decode("utf-8", errors="replace").splitlines()
    if not lines:
        return None
    # Imported here: a one-file check (what pre-commit and editors run) walks no folder.
    from xlalint.engine.gitignore import IgnoreSpec

    return IgnoreSpec.from_lines(lines)


class IgnoreRules:
    """The .gitignore files that apply in a tree, loaded once per folder."""

    def __init__(self) -> None:
        self._specs: dict[Path, IgnoreSpec | None] = {}

    def _spec(self, folder: Path) -> IgnoreSpec | None:
        if folder not in self._specs:
            self._specs[folder] = _load_ignore(folder)
        return self._specs[folder]

    def ignored(self, path: Path, is_dir: bool, top: Path | None = None) -> bool:
        """As git decides: the nearest .gitignore with a pattern that matches decides
        (so a nested ``!keep.py`` re-includes what a parent ignores). The .gitignore
        files read are those up to the repository's root, or up to ``top`` (the folder
        being walked) outside a repository. A pattern that matches only ``top`` or a folder
        above it does not count (ruff's rule: a folder named on the command line is walked)."""
        root = _git_root(path.parent) or top or path.parent
        for folder in (path.parent, *path.parent.parents):
            spec = self._spec(folder)
            if spec is not None:
                relative = path.relative_to(folder).as_posix() + ("/" if is_dir else "")
                verdict = spec.check(relative, _depth_below(top, folder))
                if verdict is not None:
                    return verdict
            if folder == root:
                break
        return False


def _depth_below(top: Path | None, folder: Path) -> int:
    """How many names ``top`` (the folder named on the command line) has below ``folder``
    (0 when it is not below it)."""
    if top is None or not top.is_relative_to(folder):
        return 0
    return len(top.parts) - len(folder.parts)


def discover(
    paths: Iterable[Path],
    finder: ConfigFinder,
    *,
    force_exclude: bool = False,
    respect_gitignore: bool = True,
    unreadable: dict[Path, str] | None = None,
) -> Iterator[Path]:
    """The files to check under ``paths``. A folder the walk cannot read (no permission,
    a path over PATH_MAX) is put in ``unreadable`` with the reason: passing over it
    would let CI pass unchecked."""
    ignore = IgnoreRules()
    seen: set[Path] = set()
    for given in paths:
        path = given.absolute()
        if not _is_dir(path):
            # An explicit file, checked even when it does not exist or cannot be read (to say so).
            if force_exclude and (_default_excluded(path) or finder.for_path(path).is_excluded(path)):
                continue
            if path not in seen:
                seen.add(path)
                yield given
            continue

        def walk_error(error: OSError, top: Path = path, shown: Path = given) -> None:
            if unreadable is not None and error.filename is not None:
                folder = Path(os.fsdecode(error.filename))
                unreadable[_display(folder, shown, top)] = error.strerror or str(error)

        for folder, dirnames, filenames in os.walk(path, onerror=walk_error):
            here = Path(folder)
            settings = finder.for_path(here / "__init__.py")
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in DEFAULT_EXCLUDE
                and not settings.is_excluded(here / d)
                and not (respect_gitignore and ignore.ignored(here / d, True, path))
            )
            for name in sorted(filenames):
                if not name.endswith(PYTHON_SUFFIXES):
                    continue
                candidate = here / name
                if candidate in seen or settings.is_excluded(candidate):
                    continue
                if respect_gitignore and ignore.ignored(candidate, False, path):
                    continue
                if _special(candidate):
                    continue
                seen.add(candidate)
                yield _display(candidate, given, path)


def walk_leaves_out(path: Path, settings: Settings, ignore: IgnoreRules, top: Path) -> bool:
    """Whether a walk of ``top`` would leave the file ``path`` (absolute, below
    ``top``) out: it or a folder on the way is a default exclude, excluded by
    ``settings`` or ignored by a .gitignore, or it is not a regular file. Asked for a
    file found otherwise (an imported module), so that it is checked only where a walk
    would have checked it."""
    if _special(path) or not path.name.endswith(PYTHON_SUFFIXES):
        return True
    try:
        below = path.relative_to(top).parts
        steps = [top.joinpath(*below[: i + 1]) for i in range(len(below))]
    except ValueError:
        steps = [path]
    for step in steps:
        is_dir = step != path
        if step.name in DEFAULT_EXCLUDE or settings.is_excluded(step) or ignore.ignored(step, is_dir, top):
            return True
    return False


def linked_outside(path: Path, settings: Settings) -> Path | None:
    """The file ``path`` leads to when a symbolic link on the way leads out of the
    project (the config file's folder, else the repository the path is in, else the
    current folder); else None. As ruff, `fix` checks such a file but does not write
    it: fixing ``.`` must not rewrite what lies outside."""
    here = Path(os.path.abspath(path))
    target = Path(os.path.realpath(here))
    if target == here:
        return None
    root = Path(os.path.realpath(settings.root or _git_root(here.parent) or Path.cwd()))
    return None if target.is_relative_to(root) else target


def _is_dir(path: Path) -> bool:
    """Whether ``path`` is a folder; a path that cannot be looked at (in a folder we may
    not enter, longer than PATH_MAX) is not: reading it as a file says why."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _special(path: Path) -> bool:
    """A FIFO, device or socket named ``*.py`` (or a link to one): found by a walk, it
    is passed over, as ruff does; named on the command line, reading it says why not.
    A broken link is not special: checking it reports it."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _default_excluded(path: Path) -> bool:
    return any(part in DEFAULT_EXCLUDE for part in path.parts)


def _display(candidate: Path, given: Path, absolute: Path) -> Path:
    """Paths are shown as they were given (``src/train.py``, not an absolute path)."""
    return given / candidate.relative_to(absolute)
