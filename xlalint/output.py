"""Where a command's output goes: standard output, and report files.

A write to standard output that fails (``xlalint check > /dev/full``, a full disk, a
quota) was a traceback and exit 1, which reads as "findings". ``watch_stdout`` makes
``sys.stdout`` raise :class:`OutputError` for such a write, and the command line turns
it into one ``xlalint: error:`` line and exit 2 (see ``cli.main``).

A report written to a file (``run --json``/``--html``, ``--output-file``) is written
whole or not at all (``write_report``): on a full disk the old report stays, not an
empty or half one.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import sys
from pathlib import Path

#: How every user error starts (``help_format`` prints click's usage errors so too).
ERROR_PREFIX = "xlalint: error: "
#: The exit status of a usage or configuration error.
USAGE_EXIT = 2


def error_line(message: str) -> str:
    """A user error as one line: ``xlalint: error: <message>``."""
    return ERROR_PREFIX + " ".join(line.strip() for line in message.splitlines() if line.strip())


# What click strips from a line printed to anything but a terminal (``click.echo``).
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def echo(message: str, *, err: bool = False) -> None:
    """Print one line as ``typer.echo`` (click's) does: on stdout (``err``: stderr),
    without ANSI escape sequences unless on a terminal, flushed."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    text = message + "\n"
    if not _is_terminal(stream) and not type(stream).__module__.startswith("ipykernel."):
        text = _ANSI.sub("", text)
    stream.write(text)
    stream.flush()


class OutputError(OSError):
    """A write to standard output failed."""


class BrokenOutputPipe(OutputError, BrokenPipeError):
    """The reader of standard output is gone (``| head``): still a ``BrokenPipeError``."""


class _StandardOutput(io.FileIO):
    """File descriptor 1, whose failed writes say they were to standard output."""

    def write(self, data) -> int | None:  # type: ignore[override]
        try:
            return super().write(data)
        except BlockingIOError:
            raise
        except OSError as error:
            kind = BrokenOutputPipe if isinstance(error, BrokenPipeError) else OutputError
            raise kind(error.errno, error.strerror) from None


def watch_stdout() -> None:
    """``sys.stdout`` as it was (encoding, errors, buffering), over a file whose failed
    writes raise :class:`OutputError`."""
    current = sys.stdout
    try:
        if current is None or current.fileno() != 1:
            return  # already redirected in the process (a test, an embedding): left alone
        encoding, errors, line_buffering = current.encoding, current.errors, current.line_buffering
    except (AttributeError, OSError, ValueError):
        return
    raw = _StandardOutput(1, "w", closefd=False)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw), encoding=encoding, errors=errors, line_buffering=line_buffering, write_through=False
    )


def flush_stdout() -> None:
    """Write out what is still buffered (raises :class:`OutputError` when it cannot)."""
    if sys.stdout is not None and not sys.stdout.closed:  # the language server closes it at exit
        sys.stdout.flush()


def message(error: OutputError) -> str:
    """The one line for a failed write to standard output."""
    return f"cannot write to standard output: {error.strerror or error}"


def silence_stdout() -> None:
    """Standard output to the null device, so that what is still buffered does not fail
    a second time when the interpreter exits."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


def write_report(path: Path, text: str) -> None:
    """``text`` to ``path`` as UTF-8, whole or not at all: a temporary file beside it,
    flushed to disk, then renamed over it (on a full disk ``OSError`` is raised and the
    old file, if any, is untouched). A path that is not a regular file (``/dev/stdout``,
    a FIFO, a terminal) is written directly, as a rename would replace it."""
    data = text.encode("utf-8")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        with open(path, "wb") as handle:
            handle.write(data)
        return
    import tempfile

    target = Path(os.path.realpath(path))  # through a symbolic link: the link stays a link
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666 & ~_umask()
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:  # as click's: a stream that cannot say is not a terminal
        return False
