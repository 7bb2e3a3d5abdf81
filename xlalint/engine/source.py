"""Reading and writing source files without losing anything.

A file is read once as bytes; its encoding (PEP 263 cookie, UTF-8 by default), BOM
and newline style are remembered so that a fix writes it back byte-for-byte the
same apart from the fix. Only regular files are read, and never more than the size
limit. Writes are atomic: a temp file in the same folder, then a rename, with the
original permissions, owner, group and extended attributes (ACLs among them); a file
with several hard links is written in place instead, once the space for the new bytes
is reserved, and has its original bytes back if the write fails. A read-only file, or
one that changed since it was read, is not written. On a full disk nothing is lost.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import io
import os
import re
import stat
import time
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from xlalint.engine.stopping import GATE

MAX_BYTES = 8 * 1024 * 1024


class SourceError(Exception):
    """A file that cannot be checked, said in one line (reported as XLA000)."""

    def __init__(self, message: str, line: int = 1, col: int = 0):
        super().__init__(message)
        self.line, self.col = line, col


@dataclass(frozen=True)
class Fingerprint:
    """What a file held when it was read: a write checks it is still there."""

    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, info: os.stat_result, data: bytes) -> Fingerprint:
        return cls(info.st_size, info.st_mtime_ns, hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str = "utf-8"
    bom: bool = False
    fingerprint: Fingerprint | None = None

    @property
    def newline(self) -> str:
        for candidate in ("\r\n", "\n", "\r"):
            if candidate in self.text:
                return candidate
        return "\n"

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode(data: bytes, name: str = "<stdin>") -> SourceFile:
    if len(data) > MAX_BYTES:
        raise _too_large(len(data))
    if b"\0" in data:
        raise SourceError("file is binary (it contains NUL bytes), not Python source")
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, cookie_lines = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        message = str(exc.msg if hasattr(exc, "msg") else exc)
        if "invalid or missing encoding declaration" in message:
            raise SourceError("file is not valid UTF-8 and declares no other encoding") from None
        raise SourceError(f"cannot decode: {message}") from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    elif not _source_encoding(encoding, cookie_lines):
        raise SourceError(
            f"encoding problem: {encoding} (the coding declaration names an encoding Python cannot read source in)",
            len(cookie_lines),
        )
    body = data[len(codecs.BOM_UTF8) :] if bom else data
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        col = exc.start - (body.rfind(b"\n", 0, exc.start) + 1)
        shown = "UTF-8" if encoding.replace("_", "-").lower() in ("utf-8", "utf8") else encoding
        raise SourceError(f"file is not valid {shown} ({exc.reason} at byte {exc.start})", line, col) from None
    except LookupError:
        raise SourceError(f"unknown encoding `{encoding}` in the coding declaration") from None
    return SourceFile(text, encoding, bom)


def _source_encoding(encoding: str, cookie_lines: list[bytes]) -> bool:
    """Whether Python runs a file that declares ``encoding``: its tokenizer reads the
    declaration as ASCII, so the encoding must read those lines the same way. ``utf-16``
    and ``utf-32`` read ASCII as something else, ``rot13`` or ``hex`` are not text
    encodings at all; Python stops with "encoding problem" on all of them."""
    lines = b"".join(cookie_lines)
    if not lines.isascii():
        return True  # decoding the file says what is wrong with it
    try:
        return lines.decode(encoding) == lines.decode("ascii")
    except LookupError:
        try:
            codecs.lookup(encoding)
        except LookupError:
            return True  # an unknown encoding: decoding says so
        return False  # a codec, but not a text encoding
    except (UnicodeError, ValueError, TypeError):
        return False


class InputTooLarge(SourceError):
    """Input over the size limit; ``head`` is what was read of it (the limit and one
    byte more), for a filter to give back before the rest."""

    def __init__(self, message: str, head: bytes):
        super().__init__(message)
        self.head = head


def read_stream(stream: BinaryIO, limit: int = MAX_BYTES) -> bytes:
    """At most ``limit`` bytes of ``stream`` (stdin): one byte more is an error, not a
    read that grows until memory runs out (``check - < /dev/zero``)."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputTooLarge(f"input is too large to check (over the {limit / 2**20:g} MiB limit)", data)
    return data


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file (after symbolic links) of at most
    ``limit`` bytes. A FIFO, a device or a socket is refused without reading it (a
    FIFO would block, ``/dev/zero`` never ends); the limit is enforced on what is
    read, not only on the size ``stat`` gave."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(f"cannot read: not a regular file (a {_kind(info.st_mode)})")
        if info.st_size > limit:
            raise _too_large(info.st_size)
        os.set_blocking(fd, True)
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew since the stat
                raise _too_large(total, more=True)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "special file"


def _too_large(size: int, more: bool = False) -> SourceError:
    shown = f"{'over ' if more else ''}{size / 2**20:.1f} MiB"
    return SourceError(f"file is too large to check ({shown}; the limit is {MAX_BYTES // 2**20} MiB)")


def read(path: Path) -> SourceFile:
    before, data = read_file(path)
    decoded = decode(data, str(path))
    return replace(decoded, fingerprint=Fingerprint.of(before, data))


def read_module_text(path: Path) -> str | None:
    """The text of a module the checked file imports (the project index reads them), as
    a checked file is read: a regular file within the size limit, decoded by its cookie;
    None when it cannot be read."""
    try:
        return decode(read_regular(path, MAX_BYTES), str(path)).text
    except (OSError, SourceError, ValueError, MemoryError):
        return None


def read_file(path: Path) -> tuple[os.stat_result, bytes]:
    """The bytes of the source file ``path``, and its ``stat`` from before the read
    (what a write checks against; what the cache keys on)."""
    try:
        before = os.stat(path)
        data = read_regular(path, MAX_BYTES)
    except FileNotFoundError:
        if path.is_symlink():
            raise SourceError("cannot read: a broken symbolic link (its target does not exist)") from None
        raise SourceError("cannot read: the file does not exist") from None
    except IsADirectoryError:
        raise SourceError("cannot read: is a directory") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return before, data


def _unchanged(path: Path, original: SourceFile) -> bool:
    """Whether ``path`` still holds what ``original`` was read from."""
    if original.fingerprint is None:
        return True  # not read from a file (stdin, tests): nothing to compare
    try:
        now = os.stat(path)
        if (now.st_size, now.st_mtime_ns) != (original.fingerprint.size, original.fingerprint.mtime_ns):
            return False
        # Same size and time can hide an edit within the clock's resolution: compare the bytes.
        return Fingerprint.of(now, read_regular(path, MAX_BYTES)) == original.fingerprint
    except (OSError, SourceError):
        return False


def write_atomic(path: Path, original: SourceFile, text: str) -> None:
    """Replace ``path`` with ``text`` in the original's encoding, BOM, mode, owner and
    group, unless the file is read-only or changed since it was read (then nothing is
    written and :class:`SourceError` says why).

    A file with one link gets a temp file and a rename (a reader never sees half of
    it). A file with more than one hard link is written in place once the new bytes
    are complete and checked, as ruff does: a rename would split it from its other
    names."""
    try:
        data = original.encode(text)
    except UnicodeEncodeError:
        raise SourceError(f"the fixed code cannot be encoded in {original.encoding}") from None
    # Through a symbolic link to the file it names: the link itself stays a link.
    path = Path(os.path.realpath(path))
    try:
        info = path.stat()
    except FileNotFoundError:
        raise SourceError("the file was removed during the run") from None
    mode = stat.S_IMODE(info.st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        # Renaming over it would work (the folder is writable), but the user said no.
        raise SourceError("read-only")
    if info.st_nlink > 1:
        _write_in_place(path, original, data)
        return
    import tempfile  # only a fix writes: a check does not pay for its import

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _keep_owner(handle.fileno(), info)
            os.fchmod(handle.fileno(), mode)  # after fchown, which clears set-id bits
            kept = _copy_attributes(path, handle.fileno())
            os.fsync(handle.fileno())
        if not kept:
            # An attribute the new file cannot have (an ACL, a label): keep the file itself.
            os.unlink(tmp)
            _write_in_place(path, original, data)
            return
        if not _unchanged(path, original):
            raise SourceError("the file changed while it was being fixed (run `fix` again)")
        GATE.commit(lambda: os.replace(tmp, path))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _copy_attributes(source: Path, fd: int) -> bool:
    """Give the file open as ``fd`` the extended attributes of ``source`` (``user.*``,
    the ACL in ``system.posix_acl_access``, ...); False when one of them cannot be set
    there. A file system without extended attributes has none to lose."""
    try:
        names = os.listxattr(source)
    except OSError:
        return True  # no extended attributes here (or no support for them)
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(source, name))
        except OSError:
            return False
    return True


def _write_in_place(path: Path, original: SourceFile, data: bytes) -> None:
    """Overwrite the file itself (its other hard links, attributes and ACLs stay): only
    once the blocks for ``data`` are reserved, and with the original bytes put back if
    any step fails, so a full disk never leaves a file cut short."""
    if not _unchanged(path, original):
        raise SourceError("the file changed while it was being fixed (run `fix` again)")
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_NOCTTY", 0))
    try:
        before = _read_all(fd)
        try:
            if len(data) > len(before):
                _reserve(fd, len(data))
            GATE.commit(lambda: _replace_contents(fd, data, before))
        except BaseException:
            os.ftruncate(fd, len(before))  # a reservation (cut short, or unused) grew the file
            raise
    finally:
        os.close(fd)


def _reserve(fd: int, size: int) -> None:
    """Allocate the blocks for ``size`` bytes now (ENOSPC here, before anything is
    overwritten). Where the platform or file system cannot, the write goes on: its
    failure still puts the original bytes back."""
    allocate = getattr(os, "posix_fallocate", None)
    if allocate is None:
        return
    try:
        allocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOSYS):
            raise


def _replace_contents(fd: int, data: bytes, before: bytes) -> None:
    try:
        _write_all(fd, data)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    except BaseException:
        _write_all(fd, before)  # into blocks the file had: no new space is needed
        os.ftruncate(fd, len(before))
        os.fsync(fd)
        raise


def _read_all(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view, done = memoryview(data), 0
    while done < len(data):
        done += os.pwrite(fd, view[done:], done)


def _keep_owner(fd: int, info: os.stat_result) -> None:
    """The temp file gets the original's owner and group where we may give them (the
    owner takes privilege; a group we belong to does not)."""
    for uid in (info.st_uid, -1):
        try:
            os.fchown(fd, uid, info.st_gid)
            return
        except PermissionError:
            continue
        except OSError:
            return  # a file system without owners


TEMP_SUFFIX = ".xlalint-tmp"
# What ``tempfile.mkstemp`` puts between our prefix and suffix.
_TEMP_NAME = re.compile(r"\..+\.[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX))
# A write takes milliseconds; a temp file this old was left by a run that was killed.
STALE_TEMP_SECONDS = 15 * 60


def remove_stale_temps(folders: Iterable[Path], now: float | None = None) -> int:
    """Remove the temp files that killed ``fix`` runs left in ``folders``: only files
    named as ``write_atomic`` names them, only regular files, only old ones."""
    now = time.time() if now is None else now
    removed = 0
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith(TEMP_SUFFIX) or not _TEMP_NAME.fullmatch(entry.name):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_TEMP_SECONDS:
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                continue
    return removed
