"""``--output-file PATH``: what ``check`` and ``fix`` would print on stdout, written to
``PATH`` atomically (a temp file in the same folder, then a rename: a reader, a CI step
uploading the SARIF, never sees half a report), as ruff's ``--output-file``."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path


class OutputFileError(Exception):
    """The report could not be written: said in one line."""


class Capture(io.StringIO):
    """Where the report is printed while it is built: never a terminal (no colour
    unless ``FORCE_COLOR``), written out by :func:`write`."""

    def isatty(self) -> bool:
        return False


def write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8), whole or not at all; its folder is made
    when missing, as ruff makes it."""
    target = Path(os.path.realpath(path))
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise OutputFileError(f"--output-file {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputFileError(f"--output-file {path}: {exc.strerror or exc}") from None
