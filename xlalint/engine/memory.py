"""The memory budget: how large a file ``check`` and ``fix`` take, and how many workers run.

The parsers set the floor. ``check`` holds the file's ``ast`` tree and the analyses
over it; ``fix`` holds libcst's tree of the file (with every node's position), which
is several times larger, once per pass. Measured with ``bench/fix_memory.py`` (peak
RSS of one ``xlalint`` process against file size; the densest shapes: a list of
names ``[a,a,...]``, a file of calls ``f(a,b)``, ``x=1`` lines), the worst cases were
723 bytes of memory per byte of input for ``check`` and 3,727 for ``fix``: the
figures below round them up, and ``BASE`` is the process itself (Python, xlalint's
modules, the rules).

So with the default budget of 4 GiB a file of up to 4.9 MiB is checked and one of
up to 1.0 MiB is fixed; a larger one is refused with one line before any work (a
file too large to fix is still checked when its check fits), and no more workers run
side by side than the budget holds for the largest file among them.
``XLALINT_MEMORY_BUDGET`` (``8G``, ``512M``, bytes) sets another budget.
"""

from __future__ import annotations

import functools
import os
import re

BUDGET_ENV = "XLALINT_MEMORY_BUDGET"
DEFAULT_BUDGET = 4 * 2**30
#: Peak memory per byte of input, the worst shapes measured, rounded up.
CHECK_BYTES_PER_BYTE = 800
FIX_BYTES_PER_BYTE = 4000
#: The process before any file: the interpreter, xlalint and its rules, libcst.
BASE = 150 * 2**20
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


class BudgetError(ValueError):
    """``XLALINT_MEMORY_BUDGET`` is not a size."""


@functools.cache
def budget() -> int:
    """The memory budget in bytes: ``XLALINT_MEMORY_BUDGET``, else 4 GiB."""
    text = os.environ.get(BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_BUDGET
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", text.lower())
    if match is None:
        raise BudgetError(f"{BUDGET_ENV}={text!r} is not a size (write 4G, 512M or a number of bytes)")
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value <= BASE:
        raise BudgetError(f"{BUDGET_ENV}={text!r} is below the {BASE // 2**20} MiB xlalint needs to start")
    return value


def check_limit() -> int:
    """The largest text (in characters) a check takes within the budget."""
    return (budget() - BASE) // CHECK_BYTES_PER_BYTE


def fix_limit() -> int:
    """The largest text (in characters) a fix takes within the budget."""
    return (budget() - BASE) // FIX_BYTES_PER_BYTE


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB" if count >= 2**20 else f"{count // 2**10} KiB"


def _budget_text() -> str:
    value = budget()
    return f"{value / 2**30:g} GiB" if value >= 2**30 else f"{value // 2**20} MiB"


def over_check_limit(text: str) -> str | None:
    """Why ``text`` is not checked (one line), or None when its check fits the budget."""
    if len(text) <= check_limit():
        return None
    return (
        f"cannot check: the file ({_size(len(text))}) is over the {_size(check_limit())} a check takes "
        f"within the memory budget of {_budget_text()} ({BUDGET_ENV})"
    )


def over_fix_limit(text: str) -> str | None:
    """Why ``text`` is not fixed (one line), or None when its fix fits the budget."""
    if len(text) <= fix_limit():
        return None
    return (
        f"cannot fix: the file ({_size(len(text))}) is over the {_size(fix_limit())} a fix takes "
        f"within the memory budget of {_budget_text()} ({BUDGET_ENV}); file left unchanged"
    )


def workers(cores: int, largest: int, *, fix: bool) -> int:
    """How many files may be worked on side by side: at most ``cores``, and no more
    than the budget holds when each is as large as ``largest`` bytes (at least one)."""
    per_file = largest * (FIX_BYTES_PER_BYTE if fix else CHECK_BYTES_PER_BYTE) + BASE
    return max(1, min(cores, budget() // max(per_file, 1)))
