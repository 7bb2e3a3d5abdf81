"""Reading and writing source files without losing anything.

A file is read once as bytes; its encoding (PEP 263 cookie, UTF-8 by default), BOM
and newline style are remembered so that a fix writes it back byte-for-byte the
same apart from the fix. Writes are atomic: a temp file in the same folder, then a
rename, with the original permissions.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 8 * 1024 * 1024


class SourceError(Exception):
    """A file that cannot be checked, said in one line (reported as XLA000)."""

    def __init__(self, message: str, line: int = 1, col: int = 0):
        super().__init__(message)
        self.line, self.col = line, col


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str = "utf-8"
    bom: bool = False

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
        raise SourceError(
            f"file is too large to check ({len(data) / 2**20:.1f} MiB; the limit is {MAX_BYTES // 2**20} MiB)"
        )
    if b"\0" in data:
        raise SourceError("file is binary (it contains NUL bytes), not Python source")
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        message = str(exc.msg if hasattr(exc, "msg") else exc)
        if "invalid or missing encoding declaration" in message:
            raise SourceError("file is not valid UTF-8 and declares no other encoding") from None
        raise SourceError(f"cannot decode: {message}") from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
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


def read(path: Path) -> SourceFile:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SourceError(
                f"file is too large to check ({size / 2**20:.1f} MiB; the limit is {MAX_BYTES // 2**20} MiB)"
            )
        data = path.read_bytes()
    except FileNotFoundError:
        if path.is_symlink():
            raise SourceError("cannot read: a broken symbolic link (its target does not exist)") from None
        raise SourceError("cannot read: the file does not exist (was it removed during the run?)") from None
    except IsADirectoryError:
        raise SourceError("cannot read: is a directory") from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode(data, str(path))


def write_atomic(path: Path, original: SourceFile, text: str) -> None:
    """Replace ``path`` with ``text`` in the original's encoding, BOM and mode."""
    data = original.encode(text)
    # Through a symbolic link to the file it names: the link itself stays a link.
    path = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        raise SourceError("not written: the file was removed during the run") from None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".xlalint-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
