"""Optimizer steps: their number and times, the live counters the parent's progress line
reads, and the stop after ``--steps`` (stdlib only; runs inside the user's processes as
``_xlalint_steps``; see ``bootstrap.py``)."""

from __future__ import annotations

import contextlib
import os
import sys
import time

try:  # in the child, from the hook folder; in xlalint (tests), from the package
    import _xlalint_child_common as common
except ImportError:
    from xlalint.harness import child_common as common

#: Optimizer steps and their timing, and peak device memory: ``steps-<pid>.json``.
STEPS_PREFIX = "steps-"
#: Steps not timed: the first ones compile (XLA) or warm up caches and allocators.
WARMUP_STEPS = 3
#: Counters so far, for the parent's progress line: ``live-<pid>.json``, rewritten at
#: an optimizer step at most this often (see ``StepLog.on_step``).
LIVE_PREFIX = "live-"
LIVE_INTERVAL_S = 0.5
LIVE_EVERY_STEP_UNTIL = 10
#: Stop the run after this many optimizer steps (``xlalint run --steps N``): the step
#: hook raises ``StepLimitReached`` (a ``SystemExit(0)``), so the script's process
#: ends through its exit handlers and writes its metrics as at a normal end.
MAX_STEPS_ENV = "XLALINT_HARNESS_MAX_STEPS"
#: Steps whose time and compile count are kept for the report's per-step chart (the
#: first ones: where compilations happen); memory stays bounded on long runs.
TIMELINE_STEPS = 1000


class StepLimitReached(SystemExit):
    """Raised from the optimizer step hook after the last step ``--steps`` asked for."""


def _max_steps() -> int | None:
    try:
        value = int(os.environ.get(MAX_STEPS_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


class StepLog:
    """Optimizer steps (torch's global step hook: every optimizer, plain or through
    ``xm.optimizer_step``), when they ran, and the peak device memory."""

    def __init__(self) -> None:
        self.count = 0
        self.warm_at: float | None = None  # when step WARMUP_STEPS + 1 ended
        self.last_at: float | None = None
        self.peak_xla_bytes: int | None = None
        self._xla_memory = True  # False once the device has no memory statistics
        self._live_at: tuple[float, int] | None = None  # (when, count) of the last live write
        # Per step, for the first TIMELINE_STEPS: ms since the step before (None for the
        # first), and torch_xla's compiles so far (None without torch_xla).
        self.step_ms: list[float | None] = []
        self.step_compiles: list[int | None] = []
        self.limit = _max_steps()
        self.stopped = False  # True once the step limit ended the run

    def on_step(self, *_hook_args) -> None:
        now = time.perf_counter()
        self.count += 1
        if self.count <= TIMELINE_STEPS:
            self.step_ms.append(None if self.last_at is None else 1000 * (now - self.last_at))
            self.step_compiles.append(compiles_so_far())
        if self.count == WARMUP_STEPS + 1:
            self.warm_at = now
        self.last_at = now
        if self._xla_memory and "torch_xla" in sys.modules:
            self._sample_xla_memory()
        last = self.limit is not None and self.count >= self.limit
        # Every one of the first steps (a run that hangs after a few quick steps is
        # reported at its latest), then at most every LIVE_INTERVAL_S.
        early = self.count <= LIVE_EVERY_STEP_UNTIL
        if last or early or self._live_at is None or now - self._live_at[0] >= LIVE_INTERVAL_S:
            with contextlib.suppress(Exception):  # a progress display never breaks the script
                self._write_live(now)
        with contextlib.suppress(Exception):
            common.runtime_watch().WATCH.on_step_taken()

    def before_step(self, *_hook_args) -> None:
        """Stop the run when the step about to be taken is past ``--steps``: here, not
        right after the last step, so that the sync that ends the last step (after
        ``optimizer.step()``, or the device loader's at the next batch) has run and the
        last step is complete; the next step's graph, traced but never run, costs nothing."""
        if self.limit is not None and self.count >= self.limit and os.getpid() == common.ACTIVE_PID:
            # Through the script's own exit: its exit handlers (ours write the metrics).
            self.stopped = True
            raise StepLimitReached(0)

    def _write_live(self, now: float) -> None:
        """The counters so far, and the time per step since the last write: read at a
        step (the script's own thread), never from a thread of ours."""
        out_dir = os.environ.get(common.OUT_DIR_ENV)
        if not out_dir:
            return
        record: dict = {"steps": self.count}
        if self._live_at is not None and self.count > self._live_at[1]:
            record["ms_per_step"] = 1000 * (now - self._live_at[0]) / (self.count - self._live_at[1])
        if "torch_xla" in sys.modules:
            import torch_xla.debug.metrics as met

            record["compiles"] = compiles_so_far()
            data = met.metric_data("ExecuteTime")
            record["executions"] = int(data[0]) if data else 0
            transfers = met.metric_data("TransferFromDeviceTime")
            record["transfers"] = int(transfers[0]) if transfers else 0
        self._live_at = (now, self.count)
        common.write_json(os.path.join(out_dir, f"{LIVE_PREFIX}{os.getpid()}.json"), record)

    def _sample_xla_memory(self) -> None:
        try:
            xlac = sys.modules["torch_xla"]._XLAC
            info = xlac._xla_memory_info(str(xlac._xla_get_default_device()))
            peak = int(info.get("peak_bytes_used") or info.get("bytes_used") or 0)
        except Exception:  # the CPU device has none
            self._xla_memory = False
            return
        if peak:
            self.peak_xla_bytes = max(self.peak_xla_bytes or 0, peak)

    def to_json(self) -> dict:
        timed = self.count - WARMUP_STEPS - 1
        seconds = (self.last_at - self.warm_at) if self.warm_at is not None and self.last_at is not None else 0.0
        record = {
            "steps": self.count,
            "warmup_steps": WARMUP_STEPS,
            "timed_steps": max(timed, 0),
            "timed_seconds": seconds,
            "peak_memory_bytes": self.peak_xla_bytes,
            "memory_of": "xla" if self.peak_xla_bytes else None,
            "step_ms": self.step_ms,
            "step_compiles": self.step_compiles,
            "stopped_at_limit": self.stopped,
        }
        torch = sys.modules.get("torch")
        if not self.peak_xla_bytes and torch is not None:
            with contextlib.suppress(Exception):
                if torch.cuda.is_initialized():
                    record["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated())
                    record["memory_of"] = "cuda"
        return record


STEPS = StepLog()


def compiles_so_far() -> int | None:
    """torch_xla's UncachedCompile counter (a C++ counter read: microseconds), or None
    in a process without torch_xla."""
    if "torch_xla" not in sys.modules:
        return None
    try:
        import torch_xla.debug.metrics as met

        return int(met.counter_value("UncachedCompile") or 0)
    except Exception:
        return None


def hook_optimizer_steps(torch_module) -> None:
    """Count every optimizer's steps (torch's global hooks), stop after ``--steps``, and
    install the runtime watch."""
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_post_hook(STEPS.on_step)
    if STEPS.limit is not None:
        register_optimizer_step_pre_hook(STEPS.before_step)
    common.runtime_watch().WATCH.install(torch_module, common.innermost_user_frame)
