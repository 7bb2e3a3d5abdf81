"""``--watch``: check, then check again whenever a file the check reads changes, as
ruff's ``--watch``. Polling (the size and modification time of each file the walk finds,
and of the config files above them, every ``interval`` seconds): no dependency, and
the same on every platform; a change seen is checked once the files are quiet for one
more poll."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

CONFIG_NAMES = ("pyproject.toml", "xlalint.toml", ".gitignore")
Snapshot = dict[str, tuple[int, int]]


def snapshot(files: Iterable[Path], folders: Iterable[Path] = ()) -> Snapshot:
    """Each file's (size, mtime in ns), and each config file in ``folders`` and above."""
    stamps: Snapshot = {}
    for path in files:
        _stamp(stamps, path)
    for folder in folders:
        for current in (folder.absolute(), *folder.absolute().parents):
            for name in CONFIG_NAMES:
                _stamp(stamps, current / name)
    return stamps


def _stamp(stamps: Snapshot, path: Path) -> None:
    try:
        info = os.stat(path)
    except OSError:
        return
    stamps[str(path)] = (info.st_size, info.st_mtime_ns)


def watch(
    run_once: Callable[[], None],
    take_snapshot: Callable[[], Snapshot],
    say: Callable[[str], None],
    *,
    interval: float = 0.5,
    rounds: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Run ``run_once``, then again after each change ``take_snapshot`` sees, until
    interrupted (or ``rounds`` runs in all, for a test). Returns the runs made."""
    say(f"[{_now()}] Starting linter in watch mode...")
    before = take_snapshot()
    run_once()
    runs = 1
    while rounds is None or runs < rounds:
        sleep(interval)
        now = take_snapshot()
        if now == before:
            continue
        # Wait for the writer to finish: one more poll with nothing new.
        while True:
            sleep(interval)
            settled = take_snapshot()
            if settled == now:
                break
            now = settled
        before = now
        say(f"[{_now()}] File change detected...")
        run_once()
        runs += 1
    return runs


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")
