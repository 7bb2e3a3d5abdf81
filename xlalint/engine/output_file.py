"""``--output-file PATH``: what ``check`` and ``fix`` would print on stdout, written to
``PATH`` atomically (a temp file in the same folder, then a rename: a reader, a CI step
uploading the SARIF, never sees half a report), as ruff's ``--output-file``."""

from __future__ import annotations

import io
import os
from pathlib import Path

from xlalint.output import write_report


class OutputFileError(Exception):
    """The report could not be written: said in one line."""


class Capture(io.StringIO):
    """Where the report is printed while it is built: never a terminal (no colour
    unless ``FORCE_COLOR``), written out by :func:`write`."""

    def isatty(self) -> bool:
        return False


def write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8), whole or not at all (``write_report``); its
    folder is made when missing, as ruff makes it."""
    try:
        Path(os.path.realpath(path)).parent.mkdir(parents=True, exist_ok=True)
        write_report(path, text)
    except OSError as exc:
        raise OutputFileError(f"--output-file {path}: {exc.strerror or exc}") from None
