"""The --compare progress display: a redrawn spinner line on a terminal, plain lines
otherwise."""

from __future__ import annotations

import io

from xlalint.harness.progress import Progress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(stream)
    progress.start("original")
    progress.tick(1.0)
    progress.finish("exit status 0, 1.2 s")
    assert stream.getvalue() == ("xlalint run: running original ...\nxlalint run: original: exit status 0, 1.2 s\n")


def test_spinner_redrawn_in_place_on_a_terminal():
    stream = FakeTerminal()
    progress = Progress(stream)
    progress.start("fixed")
    progress.tick(0.5)
    text = stream.getvalue()
    assert text.startswith("\r") and "running fixed" in text and "0.5 s" in text
    assert "\n" not in text
    progress.finish("exit status 0, 2.0 s")
    assert stream.getvalue().endswith("\r\033[Kxlalint run: fixed: exit status 0, 2.0 s\n")
