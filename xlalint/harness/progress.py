"""A progress display on stderr while `--compare` runs the scripts.

On a terminal: one line with a spinner, the elapsed time and what the script has done
so far (compiles, executions, optimizer steps, ms per step: the child writes them at
its steps), redrawn in place. Not on a terminal (CI logs, pipes): one plain line when
a run starts and one when it ends.
"""

from __future__ import annotations

import time
from typing import TextIO

from xlalint.harness.results import LiveCounters

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

    def tick(self, elapsed: float, live: LiveCounters | None = None) -> None:
        if not self._tty or time.monotonic() - self._last_draw < _REDRAW_S:
            return
        self._last_draw = time.monotonic()
        spinner = _SPINNER[self._frame % len(_SPINNER)]
        self._frame += 1
        # Erase to the end of the line: the counters' text can get shorter.
        self._write(f"\r{spinner} running {self._label} {elapsed:6.1f} s{live_text(live)}\033[K")

    def finish(self, summary: str) -> None:
        clear = "\r\033[K" if self._tty else ""
        self._write(f"{clear}xlalint run: {self._label}: {summary}\n")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


def live_text(live: LiveCounters | None) -> str:
    """``: 5 compiles, 8 executions, 6 steps, 108.9 ms/step`` (what is known so far)."""
    if live is None:
        return ""
    parts = []
    if live.compiles is not None:
        parts.append(f"{live.compiles} compiles")
    if live.executions is not None:
        parts.append(f"{live.executions} executions")
    parts.append(f"{live.steps} steps")
    if live.ms_per_step is not None:
        parts.append(f"{live.ms_per_step:.1f} ms/step")
    return ": " + ", ".join(parts)
