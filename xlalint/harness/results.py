"""What one run of a script produced: exit status, metrics, and compile/execution causes."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlalint.harness.cleanup import Leftovers

if TYPE_CHECKING:
    from xlalint.harness.shapes import ShapeChange


@dataclass(frozen=True)
class Cause:
    """One compilation or execution and the line in the user's script that caused it."""

    kind: str  # "compilation" | "execution"
    cause: str  # torch_xla's words, e.g. "user torch_xla.sync"
    file: str | None  # the user's script as given on the command line, or another file
    # Line in `file` (in the user's script even when a copy ran); None for a line the
    # fix inserted, which has no line in the user's file (see `fixed_line`).
    line: int | None
    # The lint finding joined to this site: the one on that line (e.g. "XLA102"), or
    # for a site that compiled several graphs because its inputs changed shape, the
    # finding that explains the change (XLA101/XLA301/XLA302).
    code: str | None
    # Context for the text report (not in the JSON): the code that ran there, and
    # whether the fix wrote that line (so it is not the user's text at `line`).
    text: str = field(default="", compare=False)
    from_fix: bool = field(default=False, compare=False)
    #: The line in the fixed copy, for a line the fix wrote (rewrote or inserted).
    fixed_line: int | None = field(default=None, compare=False)
    #: For a line the fix inserted: the user's line it follows (text report only).
    after_line: int | None = field(default=None, compare=False)
    #: On compilations at a site that compiled more than one graph: the inputs whose
    #: shape changed during the run.
    shape_changes: tuple[ShapeChange, ...] = field(default=(), compare=False)
    #: (code, where) of the findings that explain the shape changes (text only): a line
    #: of the user's script, or "file:line" in one of its local modules.
    explained_by: tuple[tuple[str, int | str | None], ...] = field(default=(), compare=False)
    #: The file that ran and the line in it (the fixed copy's), for matching a site to
    #: the loop of a transfer (``ShapeChange.feeds``); not in the report.
    run_site: tuple[str, int] | None = field(default=None, compare=False)

    def to_json(self) -> dict:
        record = {
            "kind": self.kind,
            "cause": self.cause,
            "file": self.file,
            "line": self.line,
            "code": self.code,
        }
        if self.fixed_line is not None:
            record["fixed_line"] = self.fixed_line
        if self.shape_changes:
            record["shape_changes"] = [change.to_json() for change in self.shape_changes]
        return record


@dataclass(frozen=True)
class RuntimeFinding:
    """What the child saw at run time that confirms a silent bug (XLA501, XLA502), at the
    line of the user's code where the static finding is reported."""

    code: str
    file: str | None  # as causes name it: the user's script as given, or a local module
    line: int | None  # in the user's file (None: a line the fix inserted, or no user frame)
    message: str
    #: The code of the static finding on that line, if any (text report only).
    joined: str | None = field(default=None, compare=False)

    def to_json(self) -> dict:
        return {"code": self.code, "file": self.file, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class LiveCounters:
    """What a run has done so far, from its processes' ``live-<pid>.json`` (written at
    optimizer steps): for the progress line while it runs."""

    steps: int = 0  # of the process that took most
    ms_per_step: float | None = None  # of that process, over its latest steps
    compiles: int | None = None  # summed over the processes that use XLA
    executions: int | None = None
    transfers: int | None = None  # device-to-host (TransferFromDeviceTime samples)

    @classmethod
    def from_records(cls, records: list[dict]) -> LiveCounters | None:
        if not records:
            return None
        main = max(records, key=lambda record: int(record.get("steps", 0)))
        xla = [record for record in records if "compiles" in record]
        ms = main.get("ms_per_step")
        return cls(
            steps=int(main.get("steps", 0)),
            ms_per_step=float(ms) if ms is not None else None,
            compiles=sum(int(record["compiles"]) for record in xla) if xla else None,
            executions=sum(int(record.get("executions", 0)) for record in xla) if xla else None,
            transfers=sum(int(record.get("transfers", 0)) for record in xla) if xla else None,
        )

    def describe(self) -> str:
        """``16 compiles, 21 executions, 142.8 s/step`` (what is known)."""
        parts = [
            f"{count} {noun}"
            for count, noun in ((self.compiles, "compiles"), (self.executions, "executions"))
            if count is not None
        ]
        if self.ms_per_step is not None:
            per_step = self.ms_per_step
            parts.append(f"{per_step / 1000:.1f} s/step" if per_step >= 1000 else f"{per_step:.1f} ms/step")
        return ", ".join(parts) or "no counters"


@dataclass
class Metrics:
    """torch_xla's metrics, summed over every process of the run that used XLA."""

    compiles: int = 0  # UncachedCompile
    cached_compiles: int = 0  # CachedCompile
    executions: int = 0  # ExecuteTime samples
    syncs: int = 0  # MarkStep
    host_transfers: int = 0  # TransferFromDeviceTime samples
    fallback_ops: dict[str, int] = field(default_factory=dict)  # op -> times executed
    compile_time_s: float = 0.0  # CompileTime total (text report only; not in the schema)
    #: Tensors created on the XLA device (CreateXlaTensor); None when a process did
    #: not say (a bootstrap without the count).
    xla_tensors: int | None = 0
    processes: int = 0

    def add(self, record: dict) -> None:
        self.compiles += int(record.get("compiles", 0))
        self.cached_compiles += int(record.get("cached_compiles", 0))
        self.executions += int(record.get("executions", 0))
        self.syncs += int(record.get("syncs", 0))
        self.host_transfers += int(record.get("host_transfers", 0))
        self.compile_time_s += float(record.get("compile_time_s", 0.0))
        if self.xla_tensors is not None and "xla_tensors" in record:
            self.xla_tensors += int(record["xla_tensors"])
        else:
            self.xla_tensors = None
        for op, count in dict(record.get("fallback_ops", {})).items():
            self.fallback_ops[op] = self.fallback_ops.get(op, 0) + int(count)
        self.processes += 1


@dataclass
class Steps:
    """Optimizer steps of a run (the process that took most of them) and their speed."""

    steps: int
    timed_steps: int  # after the warm-up steps
    timed_seconds: float
    warmup_steps: int
    peak_memory_bytes: int | None = None  # device memory: XLA's peak, or torch.cuda's
    memory_of: str | None = None  # "xla" | "cuda"
    #: Per step (the first ``bootstrap.TIMELINE_STEPS``): ms since the step before
    #: (None for the first) and compiles so far (None without torch_xla); for charts.
    step_ms: tuple[float | None, ...] = ()
    step_compiles: tuple[int | None, ...] = ()
    #: The run ended because it reached ``--steps`` (the bootstrap stopped it).
    stopped_at_limit: bool = False

    @property
    def per_second(self) -> float | None:
        """Steps per second after the warm-up; None with too few steps to time."""
        if self.timed_steps < 1 or self.timed_seconds <= 0:
            return None
        return self.timed_steps / self.timed_seconds

    @classmethod
    def from_json(cls, record: dict) -> Steps:
        peak = record.get("peak_memory_bytes")
        return cls(
            steps=int(record["steps"]),
            timed_steps=int(record.get("timed_steps", 0)),
            timed_seconds=float(record.get("timed_seconds", 0.0)),
            warmup_steps=int(record.get("warmup_steps", 0)),
            peak_memory_bytes=int(peak) if peak is not None else None,
            memory_of=str(record["memory_of"]) if record.get("memory_of") else None,
            step_ms=tuple(None if v is None else float(v) for v in record.get("step_ms", [])),
            step_compiles=tuple(None if v is None else int(v) for v in record.get("step_compiles", [])),
            stopped_at_limit=bool(record.get("stopped_at_limit", False)),
        )


@dataclass
class RunResult:
    label: str  # "original" | "fixed"
    description: str
    exit_code: int | None  # the child's return code; negative: killed by that signal
    wall_s: float
    metrics: Metrics | None  # None when no process wrote metrics (killed, or no XLA)
    causes: list[Cause]
    timed_out: bool = False
    timeout_s: float | None = None
    stderr_tail: str = ""
    stdout_tail: str = ""
    import_error: str | None = None  # torch/torch_xla failed to import in the child
    #: The processes the script left running when it ended, and what became of them.
    leftovers: Leftovers = field(default_factory=Leftovers)
    notes: list[str] = field(default_factory=list)
    #: Results that look like success but are not what was asked, e.g. "no XLA
    #: computation ran" (the script chose the CPU).
    warnings: list[str] = field(default_factory=list)
    #: Run as plain PyTorch on the GPU (no XLA): the native baseline of --device cuda --compare.
    native: bool = False
    steps: Steps | None = None  # None: no optimizer step was taken (or the process was killed)
    #: The user's files whose fixed copy ran in their place (as the report names them).
    fixed_files: list[str] = field(default_factory=list)
    #: Silent bugs the child saw happen (XLA501, XLA502).
    runtime_findings: list[RuntimeFinding] = field(default_factory=list)
    #: The last loss the script called ``backward`` on (the runtime watch's), when it
    #: could be read without running a graph; None otherwise.
    final_loss: float | None = None
    #: The counters the script's processes wrote at their latest step: what a run that
    #: was killed had measured (its metrics at exit were never written).
    live: LiveCounters | None = None
    max_steps: int | None = None  # ``--steps``: the run stopped after that many steps
    #: The user's loss at each optimizer step (before any scaler); None: not readable.
    losses: list[float | None] = field(default_factory=list)
    #: Why the run was not made (``status`` "skipped"), e.g. the original imports torch_xla.
    skipped: str | None = None
    #: How a failed run ended: ``KeyError: 'memory' at utils.py:143`` (the exception and
    #: the innermost line of the user's code it went through).
    error: str | None = None

    @classmethod
    def skipped_run(cls, label: str, description: str, reason: str) -> RunResult:
        return cls(
            label=label, description=description, exit_code=None, wall_s=0.0, metrics=None, causes=[], skipped=reason
        )

    @property
    def killed(self) -> bool:
        """Stopped from outside (timeout or a signal): its numbers cover part of a run."""
        return self.timed_out or self.signal_name is not None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def signal_name(self) -> str | None:
        if self.exit_code is None or self.exit_code >= 0:
            return None
        try:
            return signal.Signals(-self.exit_code).name
        except ValueError:
            return f"signal {-self.exit_code}"

    @property
    def status(self) -> str:
        """``ok``, ``failed``, ``killed``, ``timeout`` or ``skipped`` (the JSON's ``status``)."""
        if self.skipped:
            return "skipped"
        if self.timed_out:
            return "timeout"
        if self.signal_name:
            return "killed"
        return "ok" if self.exit_code == 0 else "failed"

    @property
    def steps_taken(self) -> int | None:
        """Optimizer steps: those recorded at exit, or at the latest step of a killed run."""
        if self.steps is not None:
            return self.steps.steps
        return self.live.steps if self.live is not None and self.live.steps else None

    def measured_so_far(self) -> str | None:
        """``after step 6: 16 compiles, 21 executions, 142.8 s/step``: what a run stopped
        from outside had measured (None when it did not reach a step)."""
        if not self.killed or self.live is None or not self.live.steps:
            return None
        return f"after step {self.live.steps}: {self.live.describe()}"

    def numbers(self) -> dict:
        """compiles, executions, transfers and ms_per_step: the metrics at exit, else (a
        run that was killed) the counters at its latest step."""
        metrics, live = self.metrics, self.live
        if metrics is not None:
            compiles, executions, transfers = metrics.compiles, metrics.executions, metrics.host_transfers
        elif live is not None:
            compiles, executions, transfers = live.compiles, live.executions, live.transfers
        else:
            compiles = executions = transfers = None
        speed = self.steps.per_second if self.steps else None
        ms = 1000.0 / speed if speed else (live.ms_per_step if live is not None else None)
        return {
            "compiles": compiles,
            "executions": executions,
            "transfers": transfers,
            "ms_per_step": _rounded(ms),
        }

    def status_line(self) -> str:
        if self.skipped:
            return f"skipped: {self.skipped}"
        so_far = self.measured_so_far()
        if self.timed_out:
            line = f"timed out after {self.timeout_s:g} s: killed (with its child processes)"
            return f"{line} {so_far}" if so_far else line
        if self.signal_name:
            return f"killed by {self.signal_name}" + (f" {so_far}" if so_far else "")
        if self.exit_code == 0:
            return "exit status 0"
        return f"failed with exit status {self.exit_code}"

    def leftover_notes(self) -> list[str]:
        """What the report says of the processes the script left running: only those
        found and seen to die are said to be killed."""
        left, notes = self.leftovers, []
        if left.killed:
            pids = ", ".join(map(str, left.killed))
            notes.append(f"the script left processes running; they were killed (pid {pids})")
        if left.not_killed:
            pids = ", ".join(map(str, left.not_killed))
            notes.append(f"the script left processes running that could not be killed: pid {pids} still running")
        if not left.tracked:
            notes.append(
                "processes the script started in a new session with an emptied environment cannot be "
                "found on this system; any such process was not killed"
            )
        return notes

    def to_json(self) -> dict:
        record = self._metrics_json()
        numbers = self.numbers()
        record.update(
            status=self.status,
            steps=self.steps_taken,
            loss=list(self.losses),
            ms_per_step=numbers["ms_per_step"],
            transfers=numbers["transfers"],
        )
        if record["compiles"] is None:  # killed: what it had done at its latest step
            record.update(compiles=numbers["compiles"], executions=numbers["executions"])
        reason = self.skipped or self.error or (None if self.ok else self.status_line())
        if reason:
            record["reason"] = reason
        if self.runtime_findings:
            record["runtime_findings"] = [finding.to_json() for finding in self.runtime_findings]
        return record

    def _metrics_json(self) -> dict:
        metrics = self.metrics

        def value(name: str) -> int | None:
            return getattr(metrics, name) if metrics else None

        return {
            "exit_code": self.exit_code,
            "wall_s": round(self.wall_s, 3),
            "compiles": value("compiles"),
            "cached_compiles": value("cached_compiles"),
            "executions": value("executions"),
            "syncs": value("syncs"),
            "host_transfers": value("host_transfers"),
            "fallback_ops": sorted(metrics.fallback_ops) if metrics else [],
            "causes": [cause.to_json() for cause in self.causes],
            "warnings": list(self.warnings),
            "native": self.native,
            "steps": self.steps.steps if self.steps else None,
            "steps_per_s": _rounded(self.steps.per_second) if self.steps else None,
            "peak_memory_bytes": self.steps.peak_memory_bytes if self.steps else None,
            "fixed_files": list(self.fixed_files),
            "final_loss": self.final_loss,
            "leftovers": {
                "killed": list(self.leftovers.killed),
                "not_killed": list(self.leftovers.not_killed),
                "tracked": self.leftovers.tracked,
            },
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
