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


# Set by the command line (``cli.main``): this process runs one command and ends.
_ONE_SHOT = False


def one_shot(value: bool = True) -> None:
    """Say whether this process checks (or fixes) its files once and ends, so that what
    it has built before it starts on them lives until the end: the command line's does;
    ``--watch``'s, which checks again and again, does not."""
    global _ONE_SHOT
    _ONE_SHOT = value


def settle() -> None:
    """In a one-shot process (``one_shot``), take every object made so far
    out of the collector's reach (``gc.freeze``): the modules, the settings, the rules
    live until the process ends, yet the collector traversed them with the first file's
    garbage and again at exit (an eighth of a one-file check), and a pool's workers
    copied their pages to do so. Objects made later are collected as ever. Elsewhere
    (the language server, tests, a library caller) it does nothing."""
    if _ONE_SHOT:
        gc.freeze()
