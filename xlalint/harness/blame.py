"""Which fix broke the run: delta debugging over the fixes applied (``run --bisect``).

When the fixed run crashes, or its loss leaves the CPU reference's, where the port ran
well, some of the fixes beyond the port's are to blame. Each trial runs the program with
a subset of the applied fixes (re-fixed with only those, see ``prepare.fixed_version``'s
``only``), bounded by ``--steps``. The search (Zeller's ddmin, on the fixes to withdraw)
finds a smallest set whose withdrawal makes the run good again: usually one fix, named
with its file, line, rule and what it does, and the error it caused.

Withdrawing every candidate gives the port's code, which ran well: that is not run
again. Trials are cached by the set of fixes they apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from xlalint.harness import working_copy
from xlalint.harness.prepare import AppliedFix, ScriptVersion, UserFile, fixed_version
from xlalint.harness.progress import Progress
from xlalint.harness.results import RunResult
from xlalint.harness.runner import RunSettings, execute
from xlalint.harness.verdict import Verdict, loss_track


@dataclass
class Blame:
    """The fixes whose withdrawal makes the run good, and what they caused."""

    fixes: list[AppliedFix]  # empty: none found (``reason`` says why)
    error: str  # what the fixed run did: its exception and line, or its divergence
    trials: int
    seconds: float
    crash: bool = True  # False: the fixed run diverged from the CPU loss
    reason: str | None = None
    trial_notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """``the crash comes from the fix at utils.py:132 (XLA104 ...): KeyError 'memory'
        at utils.py:143 (bisect: 3 trials, 41.2 s)``"""
        cost = f"bisect: {self.trials} trial{'' if self.trials == 1 else 's'}, {self.seconds:.1f} s"
        what = "the crash" if self.crash else "the divergence"
        if not self.fixes:
            return f"{what} of the fixed run ({self.error}) could not be put on one fix: {self.reason} ({cost})"
        named = " and ".join(f"the fix at {fix.describe()}" for fix in self.fixes)
        return f"{what} comes from {named}: {self.error} ({cost})"

    def to_json(self) -> dict:
        first = self.fixes[0] if self.fixes else None
        record = {
            "path": first.path if first else None,
            "line": first.line if first else None,
            "code": first.code if first else None,
            "error": self.error,
            "trials": self.trials,
            "seconds": round(self.seconds, 3),
            "fixes": [{"path": f.path, "line": f.line, "code": f.code, "title": f.title} for f in self.fixes],
        }
        if self.reason:
            record["reason"] = self.reason
        return record


def needs_bisect(fixed: RunResult, port: RunResult | None, diverged: bool) -> bool:
    """The fixed run crashed or diverged where the port ran well."""
    return port is not None and port.ok and (not fixed.ok or diverged)


def bisect(
    candidates: list[AppliedFix],
    kept: list[AppliedFix],
    trial: Callable[[frozenset[AppliedFix]], RunResult],
    is_bad: Callable[[RunResult], bool],
    error: str,
    *,
    crash: bool = True,
) -> Blame:
    """Find the fixes among ``candidates`` to withdraw so that the run is good again.

    ``kept``: fixes applied in every trial (the port's); ``trial(applied)`` runs the
    program with those fixes; ``is_bad(result)``: the problem is still there. With all
    candidates applied the run is bad (the fixed run), with none it is good (the port).
    """
    started = time.monotonic()
    results: dict[frozenset[AppliedFix], bool] = {}
    notes: list[str] = []
    everything = frozenset(candidates) | frozenset(kept)

    def good_without(withdrawn: list[AppliedFix]) -> bool:
        applied = everything - frozenset(withdrawn)
        if applied not in results:
            result = trial(applied)
            results[applied] = not is_bad(result)
            notes.append(
                f"without {', '.join(fix.describe() for fix in withdrawn)}: "
                f"{'good' if results[applied] else 'still ' + ('crashes' if crash else 'diverges')}"
                f" ({result.status_line()})"
            )
        return results[applied]

    if not candidates:
        return Blame([], error, 0, time.monotonic() - started, crash, "the fixed run has no fix beyond the port's")
    blamed = _ddmin(list(candidates), good_without)
    seconds = time.monotonic() - started
    return Blame(blamed, error, len(results), seconds, crash, trial_notes=notes)


def _ddmin(items: list[AppliedFix], good_without: Callable[[list[AppliedFix]], bool]) -> list[AppliedFix]:
    """A 1-minimal subset of ``items`` whose withdrawal is good (withdrawing all is)."""
    granularity = 2
    while len(items) >= 2:
        chunks = _split(items, granularity)
        for chunk in chunks:
            if good_without(chunk):
                items, granularity = chunk, 2
                break
        else:
            complements = [[item for item in items if item not in chunk] for chunk in chunks] if granularity > 2 else []
            for complement in complements:
                if good_without(complement):
                    items, granularity = complement, max(granularity - 1, 2)
                    break
            else:
                if granularity >= len(items):
                    break
                granularity = min(len(items), granularity * 2)
    return items


def _split(items: list, parts: int) -> list[list]:
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        if end > start:
            chunks.append(items[start:end])
        start = end
    return chunks


def blame_fixed_run(
    *,
    original: ScriptVersion,
    port: ScriptVersion | None,
    fixed: ScriptVersion,
    user_files: list[UserFile],
    runs: dict[str, RunResult],
    judged: Verdict | None,
    settings: RunSettings,
    workdir: Path,
    unsafe: bool,
    stderr: TextIO,
    forced: bool = False,
) -> Blame | None:
    """Bisect the fixed run's fixes when it crashed or diverged where the port ran well
    (``forced``: ``--bisect``, also to say why it cannot). None: nothing to bisect."""
    fixed_run, port_run, reference_run = runs.get("fixed"), runs.get("port"), runs.get("reference")
    if fixed_run is None or fixed_run.skipped:
        return None
    diverged = judged is not None and judged.diverges
    crash = not fixed_run.ok
    if not crash and not diverged:
        return None
    error = (fixed_run.error or fixed_run.status_line()) if crash else judged.loss.text()
    if not needs_bisect(fixed_run, port_run, diverged):
        if not forced:
            return None
        why = "no port run" if port_run is None else f"the port did not run well either ({port_run.status_line()})"
        return Blame([], error, 0, 0.0, crash, f"{why}: the fixes beyond it are not alone to blame")
    applied = fixed.all_applied_fixes()
    in_port = set(port.all_applied_fixes()) if port is not None else set()
    kept = [fix for fix in applied if fix in in_port]
    candidates = [fix for fix in applied if fix not in in_port]
    progress = Progress(stderr)
    count = [0]

    def trial(fixes: frozenset[AppliedFix]) -> RunResult:
        count[0] += 1
        name = f"trial-{count[0]}"
        version = fixed_version(
            original,
            user_files,
            workdir,
            label="fixed",
            folder=name,
            unsafe=unsafe,
            only=fixes,
            description=f"bisect trial {count[0]} ({len(fixes)} of {len(applied)} fixes)",
        )
        copy = working_copy.make_working_copy(Path.cwd(), workdir / f"{name}-cwd")
        progress.start(version.description)
        result = execute(
            version, replace(settings, cwd=copy.path, on_tick=progress.tick, echo_to=None), workdir / f"{name}-out"
        )
        progress.finish(f"{result.status_line()}, {result.wall_s:.1f} s")
        return result

    def is_bad(result: RunResult) -> bool:
        if crash:
            return not result.ok
        if not result.ok or reference_run is None:
            return True
        track = loss_track(reference_run.losses, result.losses, judged.loss.tolerance)
        return track is None or track.diverges_at is not None

    return bisect(candidates, kept, trial, is_bad, error, crash=crash)
