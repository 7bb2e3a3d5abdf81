"""The garbage collector's thresholds for a run of xlalint.

Checking or fixing a file builds many objects (the `ast` and libcst trees, their
indexes) and frees few until the file is done. At CPython's default (a young collection
every 700 new objects) the older generations are collected again and again while the
trees grow, so a fix of a file 8x as long took 11x the time (7.9x with a young collection
every 100,000 objects, 8.5x with none: ``bench/linear_check.py``'s "fixable lines"). The trees hold few
reference cycles (the parent links are dropped when a file is done), so collecting less
often costs little memory.
"""

from __future__ import annotations

import gc

#: Young objects between collections, then the generation-1 and -2 multipliers.
THRESHOLDS = (100_000, 50, 100)


def collect_less_often() -> None:
    """Raise the thresholds for this process (and the workers it forks); never lowers them."""
    current = gc.get_threshold()
    gc.set_threshold(*(max(now, wanted) for now, wanted in zip(current, THRESHOLDS)))
