"""Read torch_xla's ``PT_XLA_DEBUG_LEVEL=2`` output: why each graph was compiled/executed.

torch_xla 2.9.0 writes one block per compilation and per execution, every line
prefixed with its analysis name (checked by experiment)::

    Compilation Analysis: ================================================================
    Compilation Analysis: Compilation Cause
    Compilation Analysis:   most likely user code trying to access tensor value before torch_xla.sync
    Compilation Analysis: Graph Info:
    Compilation Analysis:   Graph Hash: 48b9fd5bddb4687b0573540753f232bc
    Compilation Analysis:   Number of Graph Inputs: 1
    Compilation Analysis:   Number of Graph Outputs: 1
    Compilation Analysis: Python Frame Triggered Execution:
    Compilation Analysis:   sync (/.../site-packages/torch_xla/torch_xla.py:87)
    Compilation Analysis:   <module> (/tmp/train.py:10)
    Compilation Analysis: ----------------------------------------------------------------
    Compilation Analysis: ================================================================

(``Execution Analysis:`` blocks have the same shape; ``Post Compilation Analysis:``
blocks carry sizes only and are skipped.) Frames are listed innermost first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

_PREFIXES = {"Compilation Analysis:": "compilation", "Execution Analysis:": "execution"}
MAX_LINE_CHARS = 64_000  # a debug line is far shorter; a longer one is cut
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*):(?P<line>\d+)\)$")


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int


@dataclass
class RawCause:
    """One compilation or execution, as torch_xla reported it."""

    kind: str  # "compilation" | "execution"
    cause: str
    frames: list[Frame] = field(default_factory=list)


def parse_debug_text(text: str) -> list[RawCause]:
    return parse_debug_lines(text.splitlines())


def parse_debug_lines(lines: Iterable[str]) -> list[RawCause]:
    """The causes in the debug output's lines, read one at a time (a file of them can be
    gigabytes: it is never held whole)."""
    causes: list[RawCause] = []
    current: RawCause | None = None
    section = None  # which part of the block the next indented lines belong to
    for line in lines:
        raw_line = line.rstrip("\r\n")
        kind, body = _split_prefix(raw_line)
        if kind is None:
            continue
        stripped = body.strip()
        if stripped in ("Compilation Cause", "Execution Cause"):
            current = RawCause(kind=kind, cause="")
            causes.append(current)
            section = "cause"
            continue
        if current is None or current.kind != kind:
            continue
        if stripped.startswith("----") or stripped.startswith("===="):
            current, section = None, None
        elif stripped == "Graph Info:":
            section = "graph"
        elif stripped.startswith("Python Frame Triggered Execution"):
            section = "frames"
        elif section == "cause" and stripped:
            current.cause = f"{current.cause}; {stripped}" if current.cause else stripped
        elif section == "frames" and stripped:
            match = _FRAME.match(stripped)
            if match:
                current.frames.append(Frame(match["function"], match["file"], int(match["line"])))
    return causes


def _split_prefix(line: str) -> tuple[str | None, str]:
    for prefix, kind in _PREFIXES.items():
        if line.startswith(prefix):
            return kind, line[len(prefix) :]
    return None, line


def bounded_lines(file: TextIO, limit: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of ``file``, each cut to ``limit`` characters (the rest of a longer
    line is skipped, never held)."""
    while line := file.readline(limit):
        if len(line) == limit and not line.endswith("\n"):
            while (rest := file.readline(limit)) and not rest.endswith("\n"):
                pass
        yield line


def parse_debug_files(paths: list[Path]) -> list[RawCause]:
    causes: list[RawCause] = []
    for path in sorted(paths):
        try:
            with open(path, encoding="utf-8", errors="replace") as file:
                causes.extend(parse_debug_lines(bounded_lines(file)))
        except OSError:
            continue
    return causes
