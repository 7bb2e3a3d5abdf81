"""The verdict of ``xlalint run --compare``: what the fix did, against the right baseline.

Three runs answer two questions (see ``session``):

- *cost*: the fixed script against the port (the original with XLA104's safe fixes
  only, the script as a newcomer first runs it on XLA): compiles, executions,
  device-to-host transfers and time per step. Only between two runs that ended well:
  a ratio against a run that failed or was stopped would be a ratio of nothing.
- *loss*: the fixed script's loss at each step against the reference's (the original
  on plain CPU, the loss the user trusts), on the same seed and the same steps: it
  tracks it within a relative tolerance, or diverges from a step on.

The text is one line; the JSON (``verdict`` in ``--json``) has the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlalint.harness.report import Painter, changes, outcome, totals
from xlalint.harness.results import RunResult

#: Relative difference of the fixed run's loss from the reference's, per step, within
#: which it "tracks" it. XLA's CPU and eager CPU add and multiply in other orders, so
#: float32 losses part by about 1e-6 relative per step and a little more as training
#: goes; a wrong fix (an objective changed, labels shifted) moves them by far more.
LOSS_TOLERANCE = 0.02


@dataclass(frozen=True)
class LossTrack:
    """The fixed run's loss against the reference's over the steps both read."""

    tolerance: float
    steps: int  # steps compared (both losses known)
    diverges_at: int | None  # the first step (1-based) past the tolerance
    reference: float | None  # at that step, or at the last step compared
    fixed: float | None

    def text(self) -> str:
        if self.diverges_at is None:
            steps = f"{self.steps} step{'' if self.steps == 1 else 's'}"
            return f"tracks the CPU loss within {self.tolerance:.0%} over {steps}"
        return f"diverges from the CPU loss from step {self.diverges_at} ({self.fixed:.3g} vs {self.reference:.3g})"

    def to_json(self) -> dict:
        return {
            "against": "reference",
            "tolerance": self.tolerance,
            "steps": self.steps,
            "tracks": self.diverges_at is None,
            "diverges_at_step": self.diverges_at,
            "reference": self.reference,
            "fixed": self.fixed,
        }


def loss_track(reference: list[float | None], fixed: list[float | None], tolerance: float = LOSS_TOLERANCE):
    """Compare two per-step loss lists; None when no step has both."""
    compared = [
        (step, ref, fix)
        for step, (ref, fix) in enumerate(zip(reference, fixed, strict=False), start=1)
        if ref is not None and fix is not None
    ]
    if not compared:
        return None
    for step, ref, fix in compared:
        if abs(fix - ref) > tolerance * max(abs(ref), 1e-12):
            return LossTrack(tolerance, len(compared), step, ref, fix)
    _, ref, fix = compared[-1]
    return LossTrack(tolerance, len(compared), None, ref, fix)


@dataclass
class Verdict:
    text: str
    #: Cost of the fixed run against the port: {metric: [port, fixed]}; None: no ratio.
    cost: dict | None = None
    cost_skipped: str | None = None
    loss: LossTrack | None = None
    loss_skipped: str | None = None

    def to_json(self) -> dict:
        record: dict = {"text": self.text, "cost": self.cost, "loss": self.loss.to_json() if self.loss else None}
        if self.cost_skipped:
            record["cost_skipped"] = self.cost_skipped
        if self.loss_skipped:
            record["loss_skipped"] = self.loss_skipped
        return record

    @property
    def diverges(self) -> bool:
        return self.loss is not None and self.loss.diverges_at is not None


def judge(runs: dict[str, RunResult], paint: Painter | None = None, tolerance: float = LOSS_TOLERANCE) -> Verdict:
    """The verdict on the ``reference``, ``port`` and ``fixed`` runs (any may be absent)."""
    paint = paint or Painter(False)
    fixed, port, reference = runs.get("fixed"), runs.get("port"), runs.get("reference")
    if fixed is None:
        return Verdict("nothing ran")
    parts: list[str] = []
    cost = cost_skipped = None
    if port is None or port.skipped:
        # The fix changed nothing beyond the port: one run, nothing to compare its cost with.
        cost_skipped = port.skipped if port is not None else "no port run"
        parts.append(f"fixed script: {totals(fixed)}" if fixed.ok else outcome(fixed, None))
    elif port.ok and fixed.ok:
        parts.append(f"fixed vs port: {changes(port, fixed, paint, with_loss=False)}")
        cost = cost_numbers(port, fixed)
    else:
        cost_skipped = "; ".join(outcome(run, other) for run, other in ((port, fixed), (fixed, port)))
        parts.append(cost_skipped)
    loss = loss_skipped = None
    if not fixed.ok:
        loss_skipped = "the fixed run did not finish, so its loss is not compared"
    elif reference is None:
        loss_skipped = "no CPU reference run"
    elif reference.skipped:
        loss_skipped = f"no CPU reference: {reference.skipped}"
    elif not reference.ok:
        loss_skipped = f"the original cannot run on CPU: {reference.error or reference.status_line()}"
    else:
        loss = loss_track(reference.losses, fixed.losses, tolerance)
        if loss is None:
            loss_skipped = "no loss to compare with the CPU reference's (none read at the same steps)"
    if loss or fixed.ok:
        parts.append(loss.text() if loss else loss_skipped)
    text = "; ".join(parts)
    # The answer first (faster? fewer compiles? the same loss?), then the numbers.
    answer = answers(cost, loss)
    return Verdict(f"{answer}: {text}" if answer else text, cost, cost_skipped, loss, loss_skipped)


def answers(cost: dict | None, loss: LossTrack | None) -> str:
    """``faster per step, fewer compiles, same loss``: what a user asks of a fix, in words
    (none when there was no port to compare the fix with)."""
    if not cost:
        return ""
    words = []
    (port_ms, fixed_ms), (port_compiles, fixed_compiles) = cost["ms_per_step"], cost["compiles"]
    if port_ms and fixed_ms:
        ratio = fixed_ms / port_ms
        words.append("faster per step" if ratio < 0.95 else "slower per step" if ratio > 1.05 else "as fast per step")
    if port_compiles is not None and fixed_compiles is not None:
        words.append(
            "fewer compiles"
            if fixed_compiles < port_compiles
            else "more compiles"
            if fixed_compiles > port_compiles
            else "as many compiles"
        )
    if loss is not None:
        words.append("same loss" if loss.diverges_at is None else "a different loss")
    return ", ".join(words)


def cost_numbers(port: RunResult, fixed: RunResult) -> dict:
    """{metric: [port, fixed]} for the cost of the fix."""
    before, after = port.numbers(), fixed.numbers()
    return {name: [before[name], after[name]] for name in _COST}


_COST = ("compiles", "executions", "transfers", "ms_per_step")
