"""The result cache of ``check``: ``.xlalint_cache`` at the project root, one JSON entry
per checked file.

An entry is found from what is known before the file is read (xlalint's version and
code, the settings, the path) and says which file it describes: its path, size,
modification time and content hash. A warm rerun reads an entry whose size and time
match the file without hashing it (as ruff does); on a mismatch the content hash
decides. Entries come from the working tree, so they are untrusted data: anything
unreadable, not exactly what :meth:`Cache.put` writes, or not about this file (another
path, a line or column beyond its text) is a miss and is rewritten. The folder is
never followed through a symbolic link, neither to read nor to write.

A check whose findings depend on a local module the file imports (XLA502 reads the class
a model is built from in ``model.py``: ``analysis/project.py``) is not kept: an entry
describes one file, and the module may change while the file does not. What the scripts
that import a module tell it (``Settings.xla_program``, ``Settings.iterated_by_importers``:
``engine/follow.py``) is part of the settings, so of the key: the module's findings told
one thing are another entry than those told another, and an importer's entry keeps what it
tells (``FileStamp.iterated``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xlalint import __version__
from xlalint.engine import findings_json
from xlalint.engine.cache_folders import write_tags
from xlalint.engine.config import Settings
from xlalint.engine.findings_json import FileStamp
from xlalint.model import Finding, split_lines

FOLDER_NAME = ".xlalint_cache"
# An entry larger than this was not written by xlalint (8 MiB of source at most).
MAX_ENTRY_BYTES = 64 * 1024 * 1024
# A file modified this recently may change again within its clock tick, unseen by
# size and time: its entry keeps no time, so the next run compares content.
RACY_NS = 2 * 10**9
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
# The user whose entries are trusted: this process's (no owners on Windows).
_USER = os.geteuid() if hasattr(os, "geteuid") else 0


@functools.cache
def code_fingerprint() -> str:
    """The name, size and modification time of every module that decides findings and
    fixes: an edited rule (a checkout, a development install, a patched release with
    the same version number) must not be answered from entries its old code wrote.
    Statting some forty files costs a quarter of a millisecond; hashing them, more."""
    package = Path(__file__).resolve().parent.parent
    parts = []
    for folder in ("engine", "analysis", "rules", "fixers"):
        for where, _, names in os.walk(package / folder):
            relative = Path(where).relative_to(package).as_posix()
            for name in names:
                if name.endswith(".py"):
                    info = os.stat(os.path.join(where, name))
                    parts.append(f"{relative}/{name}:{info.st_size}:{info.st_mtime_ns}")
    # The findings and fixes themselves (their plain data) decide them too.
    info = os.stat(package / "model.py")
    parts.append(f"model.py:{info.st_size}:{info.st_mtime_ns}")
    return "\n".join(sorted(parts))


def entry_key(settings: Settings, path: str) -> str:
    digest = _settings_digest(settings).copy()
    digest.update(path.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


# The last settings and their digest: the jobs of a run share one settings object per
# folder. One tuple, read once: threads (the language server) never mix two.
_last: tuple[Settings | None, Any] = (None, None)


def _settings_digest(settings: Settings) -> Any:
    global _last
    last = _last
    if last[0] is not settings:
        digest = hashlib.sha256()
        for part in (__version__, code_fingerprint(), repr(settings)):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
        last = _last = (settings, digest)
    return last[1]


def file_stamp(
    path: str,
    size: int,
    mtime_ns: int,
    sha256: str,
    imports: tuple[tuple[int, str, tuple[str, ...]], ...] | None = None,
    xla_program: bool | None = None,
    iterated: tuple[tuple[int, str], ...] | None = None,
) -> FileStamp:
    racy = time.time_ns() - mtime_ns < RACY_NS
    return FileStamp(path, size, 0 if racy else mtime_ns, sha256, imports, xla_program, iterated)


class Cache:
    def __init__(self, folder: Path):
        self.folder = folder

    def get(
        self, key: str, path: str, info: os.stat_result, read: Callable[[], tuple[bytes, str]]
    ) -> tuple[list[Finding], str | None, FileStamp] | None:
        """The cached findings of the file ``path`` whose ``stat`` is ``info``, its
        text if it had to be read (``read()`` gives its bytes and text), and the entry's
        stamp (what the file imports, when known); or None. A file whose size and time
        match its entry's and that has no findings is not read."""
        try:
            stamp, findings = findings_json.loads(self._read_entry(key), key)
            if stamp.path != path or stamp.size != info.st_size:
                return None
            same_time = stamp.mtime_ns == info.st_mtime_ns and stamp.mtime_ns != 0
            if same_time and not findings:
                return findings, None, stamp
            data, text = read()
            if not same_time:
                current = file_stamp(
                    path,
                    info.st_size,
                    info.st_mtime_ns,
                    hashlib.sha256(data).hexdigest(),
                    stamp.imports,
                    stamp.xla_program,
                    stamp.iterated,
                )
                if current.sha256 != stamp.sha256:
                    return None
                if current.mtime_ns:  # same content, new time: the next run needs no hash
                    self.put(key, current, findings)
            findings_json.check_against(findings, path, split_lines(text))
            return findings, text, stamp
        except (OSError, findings_json.InvalidEntry):
            return None

    def put(self, key: str, stamp: FileStamp, findings: list[Finding]) -> None:
        tmp = None
        try:
            folder = self._folder(key, create=True)
            if folder is None:
                return
            tmp = folder / f".{key}.{os.getpid()}.tmp"
            with open(tmp, "xb") as handle:  # O_EXCL: never through a link planted there
                handle.write(findings_json.dumps(key, stamp, findings))
            os.replace(tmp, folder / key)  # over whatever was there, a corrupt entry included
        except (OSError, ValueError):
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            # A cache that cannot be written is only slower.

    def _read_entry(self, key: str) -> bytes:
        folder = self._folder(key, create=False)
        if folder is None:
            raise FileNotFoundError(key)
        fd = os.open(folder / key, os.O_RDONLY | _NOFOLLOW)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
                raise findings_json.InvalidEntry("not a regular file of a sane size")
            if info.st_uid != _USER:
                # Another user (in a shared folder) may have written anything: a miss,
                # rewritten by this user (as git's safe.directory trusts only one's own).
                raise findings_json.InvalidEntry("written by another user")
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read(MAX_ENTRY_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_ENTRY_BYTES:
            raise findings_json.InvalidEntry("too large")
        return data

    def _folder(self, key: str, *, create: bool) -> Path | None:
        """The entry's folder, if it and the cache folder are real folders (a link
        shipped in the working tree must not make us read or write elsewhere)."""
        if not _real_folder(self.folder, create=create, tag=True):
            return None
        folder = self.folder / key[:2]
        return folder if _real_folder(folder, create=create) else None


def untrusted(folder: Path) -> str | None:
    """Why the cache folder ``folder`` must not be used, or None: another user owns it
    or others may write in it (they could plant entries that hide findings; as git's
    ``safe.directory``). A folder not made yet is this user's to make."""
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if info.st_uid != _USER:
        return "is owned by another user"
    if info.st_mode & stat.S_IWOTH:
        return "is writable by other users"
    return None


def _real_folder(folder: Path, *, create: bool, tag: bool = False) -> bool:
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        if not create:
            return False
        with contextlib.suppress(FileExistsError):  # another process made it: checked below like any other
            os.mkdir(folder)
        info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        return False  # lstat: a link to a folder is not one
    if tag and folder not in _TAGGED:
        # Once per process, reading or writing: made now, or found with a tag cut short
        # by a full disk. No entry is written without them (git would take it).
        try:
            write_tags(folder)
        except OSError:
            if create:
                return False
        else:
            _TAGGED.add(folder)
    return True


#: The cache folders whose tag files this process has checked (see ``write_tags``).
_TAGGED: set[Path] = set()


def project_root(config_root: str | None, start: Path) -> Path:
    """Where the cache goes: the folder of the config file in use, else the repository
    that ``start`` is in, else ``start`` (as ruff puts ``.ruff_cache``)."""
    if config_root:
        return Path(config_root)
    for folder in (start, *start.parents):
        if os.path.exists(folder / ".git"):  # never raises (Path.exists does over PATH_MAX)
            return folder
    return start
