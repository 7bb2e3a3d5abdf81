"""A progress display on stderr while `--compare` runs the scripts.

On a terminal: one line with a spinner and the elapsed time, redrawn in place. Not on
a terminal (CI logs, pipes): one plain line when a run starts and one when it ends.
"""

from __future__ import annotations

import time
from typing import TextIO

_SPINNER = "|/-\\"
_REDRAW_S = 0.1


class Progress:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        self._label = ""
        self._frame = 0
        self._last_draw = 0.0

    def start(self, label: str) -> None:
        self._label = label
        self._frame = 0
        if not self._tty:
            self._write(f"xlalint run: running {label} ...\n")

    def tick(self, elapsed: float) -> None:
        if not self._tty or time.monotonic() - self._last_draw < _REDRAW_S:
            return
        self._last_draw = time.monotonic()
        spinner = _SPINNER[self._frame % len(_SPINNER)]
        self._frame += 1
        self._write(f"\r{spinner} running {self._label} {elapsed:6.1f} s")

    def finish(self, summary: str) -> None:
        clear = "\r\033[K" if self._tty else ""
        self._write(f"{clear}xlalint run: {self._label}: {summary}\n")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()
