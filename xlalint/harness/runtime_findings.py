"""Read what the child's runtime watch saw (``runtime-<pid>.json``, see ``runtime_watch.py``):
the silent bugs it confirmed, placed on the user's lines and joined to the static
finding there, and a loss that never changed."""

from __future__ import annotations

import json
import math
from pathlib import Path

from xlalint.harness.paths import shown_path
from xlalint.harness.prepare import ScriptVersion
from xlalint.harness.results import RuntimeFinding
from xlalint.harness.runtime_watch import FIRST_LOSSES_KEPT, RUNTIME_PREFIX

#: Backward calls below which a constant loss says nothing.
MIN_BACKWARD_CALLS = 3


def collect(out_dir: Path, version: ScriptVersion, display_path: str) -> tuple[list[RuntimeFinding], list[str]]:
    """(the runtime findings of every process, without repeats; warnings: a flat loss)."""
    findings: dict[tuple, RuntimeFinding] = {}
    warnings: list[str] = []
    for path in sorted(out_dir.glob(f"{RUNTIME_PREFIX}*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            raw_findings = list(record.get("findings", []))
            losses = dict(record.get("losses", {}))
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        for raw in raw_findings:
            finding = _place(raw, version, display_path)
            if finding is not None:
                findings.setdefault((finding.code, finding.file, finding.line), finding)
        warning = _flat_loss(losses)
        if warning and warning not in warnings:
            warnings.append(warning)
    return list(findings.values()), warnings


def _place(raw: dict, version: ScriptVersion, display_path: str) -> RuntimeFinding | None:
    try:
        code, message = str(raw["code"]), str(raw["message"])
        file, line = raw.get("file"), raw.get("line")
    except (KeyError, TypeError):
        return None
    source = version.file_at(file) if isinstance(file, str) else None
    if source is None or not isinstance(line, int):
        shown = shown_path(file) if isinstance(file, str) else None
        return RuntimeFinding(code, shown, line if isinstance(line, int) else None, message)
    user_line = None if source.is_inserted_line(line) else source.user_line(line)
    return RuntimeFinding(
        code,
        display_path if source is version else source.display_path,
        user_line,
        message,
        joined=source.code_at(line),
    )


def _flat_loss(losses: dict) -> str | None:
    """ "the loss never changed" when every kept loss value is the same."""
    try:
        values = [float(v) for v in losses.get("values", [])]
        calls = int(losses.get("backward_calls", 0))
    except (TypeError, ValueError):
        return None
    if calls < MIN_BACKWARD_CALLS or len(values) < 2 or len(set(values)) != 1:
        return None
    which = f"the first {len(values) - 1} and the last" if calls > len(values) else "all"
    return f"the loss never changed: {values[0]:.6g} at {which} of {calls} backward calls (the model is not training)"


def step_losses(out_dir: Path) -> list[float | None]:
    """The loss of each optimizer step (None where it could not be read without running
    a graph), of the process that took most steps; NaN and infinities are None."""
    best: list[float | None] = []
    for path in sorted(out_dir.glob(f"{RUNTIME_PREFIX}*.json")):
        try:
            raw = dict(json.loads(path.read_text(encoding="utf-8")).get("losses", {})).get("per_step", [])
            values = [None if v is None else float(v) for v in raw]
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        if len(values) > len(best):
            best = [v if v is not None and math.isfinite(v) else None for v in values]
    return best


def final_loss(out_dir: Path) -> float | None:
    """The last loss of the process that called ``backward`` most (the training one),
    when the watch read it: its kept values end with the last loss only when it kept
    every first one and the last (see ``RuntimeWatch.read_losses``); in a run stopped
    by ``--steps``, the loss of its last step."""
    per_step = step_losses(out_dir)
    if per_step and per_step[-1] is not None:
        return per_step[-1]
    best: tuple[int, float] | None = None
    for path in sorted(out_dir.glob(f"{RUNTIME_PREFIX}*.json")):
        try:
            losses = dict(json.loads(path.read_text(encoding="utf-8")).get("losses", {}))
            values = [float(v) for v in losses.get("values", [])]
            calls = int(losses.get("backward_calls", 0))
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        complete = bool(values) and len(values) == min(calls, FIRST_LOSSES_KEPT + 1)
        # A NaN or infinite loss is no number to compare (nor valid JSON).
        if complete and math.isfinite(values[-1]) and (best is None or calls > best[0]):
            best = (calls, values[-1])
    return best[1] if best else None
