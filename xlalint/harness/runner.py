"""Run one version of a script in a child process on torch_xla and collect what it did.

The child is ``python -c "import _xlalint_bootstrap as b; b.run_main()" ARGS`` with a
temporary hook folder first on ``PYTHONPATH`` (see ``bootstrap.py``). It starts in
its own session (process group); when it ends, times out, or ``run`` is interrupted,
the whole group is killed, so no child outlives ``run``. Its stdout and stderr go to
files (echoed to our stderr while it runs, if asked), never to our stdout, which is
kept for the report.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from xlalint.harness import bootstrap, cleanup, runtime_findings, runtime_watch, shapes
from xlalint.harness.debug_log import RawCause, bounded_lines, parse_debug_files
from xlalint.harness.environment import Device
from xlalint.harness.paths import shown_path
from xlalint.harness.prepare import ScriptVersion
from xlalint.harness.results import Cause, LiveCounters, Metrics, RunResult, Steps

BOOTSTRAP_MODULE = "_xlalint_bootstrap"
RUNTIME_WATCH_MODULE = "_xlalint_runtime_watch"  # imported by the bootstrap in the child
_CHILD_COMMAND = f"import {BOOTSTRAP_MODULE} as b; b.run_main()"
_SITECUSTOMIZE = f"""\
# Written by `xlalint run` into a temporary folder; removed after the run.
import os as _os

import {BOOTSTRAP_MODULE} as _bootstrap

_bootstrap.activate()
_bootstrap.chain_next_sitecustomize(_os.path.dirname(_os.path.abspath(__file__)))
"""

STDERR_TAIL_LINES = 20
STDOUT_TAIL_LINES = 3
_TERM_GRACE_S = 3.0  # after SIGTERM, before SIGKILL
_POLL_S = 0.1
_LIVE_READ_S = 0.5  # the child writes its counters no more often (bootstrap.LIVE_INTERVAL_S)
# Frames in these places are never "the user's code".
# The harness's own child modules (``_xlalint_*.py`` in the hook folder) are not either:
# the runtime watch wraps ``Module.to``, so an error in a move passes through it.
_LIBRARY_PATH = re.compile(r"(/site-packages/|/dist-packages/|/lib/python\d+\.\d+/|^<|/_xlalint_\w+\.py$)")


def write_hook(folder: Path) -> Path:
    """The folder to put first on the child's PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    modules = [(BOOTSTRAP_MODULE, bootstrap), (RUNTIME_WATCH_MODULE, runtime_watch), *bootstrap.CHILD_MODULES]
    for name, module in modules:
        (folder / f"{name}.py").write_text(Path(module.__file__).read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    return folder


@dataclass
class RunSettings:
    python: str
    device: Device
    hook_dir: Path
    user_script: Path  # the user's file: its folder goes first on sys.path
    display_path: str  # how the user named it; used as the `file` of causes
    script_args: list[str]
    timeout_s: float | None = None
    echo_to: TextIO | None = None  # copy the child's output here while it runs
    # Put in the environment of every process of the run, to find and kill those
    # that left the process group (see cleanup.py).
    token: str | None = None
    #: Called while the script runs with the elapsed seconds and its counters so far.
    on_tick: Callable[[float, LiveCounters | None], None] | None = None
    cwd: Path | None = None  # the working directory of the run; None: ours
    #: Stop the script after this many optimizer steps (``--steps``); None: no limit.
    max_steps: int | None = None
    #: Seed torch and ``random`` when torch is imported (``--compare``: the same seed in every run).
    seed: int | None = None


def execute(version: ScriptVersion, settings: RunSettings, out_dir: Path) -> RunResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = out_dir / "stdout.txt", out_dir / "stderr.txt"
    env = _child_env(version, settings, out_dir)
    command, env = cleanup.contain([settings.python, "-c", _CHILD_COMMAND, *settings.script_args], env)
    echo = _Echo([stdout_path, stderr_path], settings.echo_to)

    timed_out = False
    leftovers = cleanup.Leftovers()
    with (
        open(stdout_path, "wb") as stdout,
        open(stderr_path, "wb") as stderr,
        cleanup.ScriptProcesses() as processes,
    ):
        started = time.monotonic()
        child = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            cwd=settings.cwd,
            start_new_session=True,  # its own process group, killed as a whole
        )
        script_ended = False
        live, live_read_at = None, 0.0
        try:
            while not _has_exited(child):
                elapsed = time.monotonic() - started
                if settings.timeout_s is not None and elapsed > settings.timeout_s:
                    timed_out = True
                    _terminate_group(child)
                    break
                echo.pump()
                if settings.on_tick:
                    if elapsed - live_read_at >= _LIVE_READ_S:
                        live, live_read_at = read_live_counters(out_dir), elapsed
                    settings.on_tick(elapsed, live)
                time.sleep(_POLL_S)
            wall_s = time.monotonic() - started
            script_ended = not timed_out
        finally:
            # Also on KeyboardInterrupt/SystemExit here. The leader is a zombie until
            # reaped, so its group id cannot have been reused yet: kill whatever the
            # script left running (launcher workers, `sleep`s...): its process tree
            # (orphans included), its group and those with its token, then reap it.
            def marked() -> list[int]:
                return _other_group_members(child.pid) + (
                    cleanup.marked_processes(settings.token) if settings.token else []
                )

            killed = processes.kill(child.pid, marked)
            _kill_group(child.pid)  # without /proc, the group is all that can be found
            if script_ended:
                leftovers = killed
            child.wait()
            echo.pump()

    metrics, notes = _collect_metrics(out_dir)
    # What it had done at its latest step: all there is of a run killed before its end.
    live = read_live_counters(out_dir)
    exit_ok = child.returncode == 0 and not timed_out
    runtime, runtime_warnings = runtime_findings.collect(out_dir, version, settings.display_path)
    return RunResult(
        label=version.label,
        description=version.description,
        exit_code=child.returncode,
        wall_s=wall_s,
        metrics=metrics,
        causes=_causes(version, settings, out_dir),
        timed_out=timed_out,
        timeout_s=settings.timeout_s,
        stderr_tail=stderr_tail(stderr_path, STDERR_TAIL_LINES),
        stdout_tail=output_tail(stdout_path, STDOUT_TAIL_LINES),
        import_error=_import_error(out_dir),
        leftovers=leftovers,
        notes=notes,
        warnings=[*(_warnings(metrics, notes) if exit_ok and not version.native else []), *runtime_warnings],
        native=version.native,
        steps=_collect_steps(out_dir),
        fixed_files=[file.display_path for file in version.files() if file.changed],
        runtime_findings=runtime,
        final_loss=runtime_findings.final_loss(out_dir),
        losses=runtime_findings.step_losses(out_dir),
        error=None if child.returncode == 0 or timed_out else failure(stderr_path, version, settings.display_path),
        live=live,
        max_steps=settings.max_steps,
    )


NOTHING_ON_XLA = "no XLA computation ran"
#: A process that imported torch_xla and ended before its exit handlers wrote its metrics.
UNFINISHED = "imported torch_xla but ended before its metrics were written (killed by a signal?): not counted"


def _warnings(metrics: Metrics | None, notes: list[str]) -> list[str]:
    """What makes a clean exit not the success it looks like."""
    if metrics is None and any(note.endswith(UNFINISHED) for note in notes):
        return ["no XLA metrics: the script's processes imported torch_xla but ended before writing them (killed?)"]
    if metrics is None:
        return [f"{NOTHING_ON_XLA}: no process of the script imported torch_xla"]
    if metrics.compiles or metrics.cached_compiles or metrics.executions:
        return []
    counts = "0 compilations and 0 executions"
    if metrics.xla_tensors == 0:
        # Typically a CPU script whose fix added syncs: they have nothing to run.
        idle_syncs = f" (and its {metrics.syncs} syncs had nothing to run)" if metrics.syncs else ""
        return [
            f"{NOTHING_ON_XLA}: {counts}: nothing ran on the XLA device; the script never put a tensor "
            f"there, so its model and data stayed on the CPU{idle_syncs}: move them with .to(torch_xla.device())"
        ]
    if metrics.xla_tensors:
        return [
            f"{NOTHING_ON_XLA}: {counts}: the script put tensors on the XLA device but no graph ran there "
            "(nothing it computed was synced with torch_xla.sync() or read back)"
        ]
    return [f"{NOTHING_ON_XLA}: {counts} (the script kept its tensors on the CPU or another device)"]


def _child_env(version: ScriptVersion, settings: RunSettings, out_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(settings.device.env)
    python_path = [str(settings.hook_dir)]
    if env.get("PYTHONPATH"):
        python_path.append(env["PYTHONPATH"])
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(python_path),
            "PYTHONUNBUFFERED": "1",  # the stderr tail and the echo are complete
            "PT_XLA_DEBUG_LEVEL": "2",
            # Each process sets its own PT_XLA_DEBUG_FILE; this is the fallback.
            "PT_XLA_DEBUG_FILE": str(out_dir / "debug-main.log"),
            bootstrap.OUT_DIR_ENV: str(out_dir),
            # The user's script runs (its __file__, sys.argv[0], sys.path[0]); the
            # bootstrap runs the fixed copies' code in place of the user's files.
            bootstrap.SCRIPT_ENV: str(settings.user_script.resolve()),
            bootstrap.SCRIPT_DIR_ENV: str(settings.user_script.resolve().parent),
        }
    )
    fixed_files = version.fixed_files()
    if fixed_files:
        fixed_files_path = out_dir / "fixed-files.json"
        fixed_files_path.write_text(json.dumps(fixed_files), encoding="utf-8")
        env[bootstrap.FIXED_FILES_ENV] = str(fixed_files_path)
    if settings.token:
        env[cleanup.TOKEN_ENV] = settings.token
    if settings.seed is not None:
        env[bootstrap.SEED_ENV] = str(settings.seed)
    if settings.max_steps:
        env[bootstrap.MAX_STEPS_ENV] = str(settings.max_steps)
    else:
        env.pop(bootstrap.MAX_STEPS_ENV, None)
    return env


def _has_exited(child: subprocess.Popen) -> bool:
    """Whether the child has exited, without reaping it (see ``_kill_group``)."""
    try:
        return os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
    except AttributeError:  # no waitid on this platform
        return child.poll() is not None


def _terminate_group(child: subprocess.Popen) -> None:
    """SIGTERM the group, give it a moment, then SIGKILL."""
    _signal_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + _TERM_GRACE_S
    while time.monotonic() < deadline and not _has_exited(child):
        time.sleep(_POLL_S)
    _signal_group(child.pid, signal.SIGKILL)


def _kill_group(group: int) -> None:
    _signal_group(group, signal.SIGKILL)


def _other_group_members(group: int) -> list[int]:
    """Processes in ``group`` other than its leader (Linux /proc; [] elsewhere)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after ")".
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(stat.parent.name)
        if pid != group and int(fields[2]) == group:
            members.append(pid)
    return members


def _signal_group(group: int, signum: int) -> bool:
    try:
        os.killpg(group, signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _collect_metrics(out_dir: Path) -> tuple[Metrics | None, list[str]]:
    metrics, notes = Metrics(), []
    for path in sorted(out_dir.glob("metrics-*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if "error" in record:
            notes.append(f"process {record.get('pid')}: metrics unreadable: {record['error']}")
            continue
        if record.get("unfinished"):
            notes.append(f"process {record.get('pid')}: {UNFINISHED}")
            continue
        metrics.add(record)
    return (metrics if metrics.processes else None), notes


def read_live_counters(out_dir: Path) -> LiveCounters | None:
    """The counters the run's processes wrote so far (None before the first step)."""
    records = []
    for path in out_dir.glob(f"{bootstrap.LIVE_PREFIX}*.json"):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a file being replaced: read at the next tick
        if isinstance(record, dict):
            records.append(record)
    try:
        return LiveCounters.from_records(records)
    except (TypeError, ValueError):
        return None


def _collect_steps(out_dir: Path) -> Steps | None:
    """The steps of the process that took most (the training process; replicas alike)."""
    best = None
    for path in sorted(out_dir.glob(f"{bootstrap.STEPS_PREFIX}*.json")):
        try:
            steps = Steps.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if best is None or steps.steps > best.steps:
            best = steps
    return best


def _import_error(out_dir: Path) -> str | None:
    path = out_dir / bootstrap.IMPORT_ERROR_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))["message"]
    except (OSError, ValueError, KeyError):
        return None


def _causes(version: ScriptVersion, settings: RunSettings, out_dir: Path) -> list[Cause]:
    causes = [
        _locate(raw, version, settings.display_path) for raw in parse_debug_files(list(out_dir.glob("debug-*.log")))
    ]
    changes = shapes.read_shape_changes(out_dir, version, settings.display_path)
    return explain_recompilations(causes, changes, shapes.explaining_findings(version))


def explain_recompilations(
    causes: list[Cause],
    changes: list[shapes.ShapeChange],
    explanations: list[tuple[str, int | str | None]],
) -> list[Cause]:
    """Attach the inputs that changed shape to each site that compiled more than one
    graph, and join the site to the finding that explains the change when the site
    has no finding of its own."""
    compilations = Counter(_site(cause) for cause in causes if cause.kind == "compilation")
    recompiling = {site for site, count in compilations.items() if count > 1}
    if not recompiling or not changes:
        return causes
    code = explanations[0][0] if explanations else None
    # A change in a loop that holds a recompiling site feeds that site only (the
    # validation loop's batches are not the training loop's); any other feeds them all.
    sites = [cause.run_site for cause in causes if _site(cause) in recompiling and cause.run_site]
    scoped = {id(change) for change in changes if any(change.feeds(*site) for site in sites)}
    explained = []
    for cause in causes:
        if _site(cause) in recompiling:
            own = [
                change
                for change in changes
                if id(change) not in scoped or (cause.run_site is not None and change.feeds(*cause.run_site))
            ]
            cause = replace(
                cause,
                code=cause.code or code,
                explained_by=tuple(explanations),
                shape_changes=tuple(own) if cause.kind == "compilation" else (),
            )
        explained.append(cause)
    return explained


def _site(cause: Cause) -> tuple:
    return (cause.file, cause.line, cause.fixed_line)


def _locate(raw: RawCause, version: ScriptVersion, display_path: str) -> Cause:
    """Attach a cause to the innermost frame in the script or its local modules; else
    to the innermost frame outside libraries; else to no file."""
    for frame in raw.frames:
        file = version.file_at(frame.file)
        if file is None:
            continue
        line = frame.line
        from_fix = file.is_fixed_line(line)
        inserted = file.is_inserted_line(line)
        return Cause(
            kind=raw.kind,
            cause=raw.cause,
            file=display_path if file is version else file.display_path,
            # A line the fix inserted is no line of the user's: shown as itself (in
            # the fixed copy), not as the user's line next to it.
            line=None if inserted else file.user_line(line),
            code=file.code_at(line),
            text=file.source_line(line),
            from_fix=from_fix,
            fixed_line=line if from_fix else None,
            after_line=file.user_line(line) if inserted else None,
            run_site=(frame.file, line),
        )
    elsewhere = next((f for f in raw.frames if not _LIBRARY_PATH.search(f.file)), None)
    if elsewhere:
        return Cause(raw.kind, raw.cause, shown_path(elsewhere.file), elsewhere.line, None)
    return Cause(raw.kind, raw.cause, None, None, None)


_TAIL_BYTES = 64_000  # read from the end of an output file: never the whole of it
_ECHO_CHUNK = 1 << 20  # copied at a time: the echo holds no more, however fast the script writes


def output_tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as file:
            file.seek(max(file.seek(0, os.SEEK_END) - _TAIL_BYTES, 0))
            data = file.read(_TAIL_BYTES)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.rstrip().splitlines()[-lines:])


_TRACEBACK = "Traceback (most recent call last):"
_TRACEBACK_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line \d+')
_MAX_SHOWN_CHARS = 500  # of the exception's line and of its frame's lines


def stderr_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of the script's stderr, after the exception that ended
    it and the innermost frame of the user's code it went through, when those came
    earlier (an exception whose message is a long IR dump ends with the dump)."""
    tail = output_tail(path, lines)
    exception = last_exception(path)
    if exception is None:
        return tail
    frame, line = exception
    shown = [_TRACEBACK, *frame, line]
    tail_lines = tail.splitlines()
    if all(part in tail_lines for part in shown[1:]):
        return tail
    return "\n".join([*shown, "  [...]", *tail_lines])


def failure(path: Path, version: ScriptVersion, display_path: str) -> str | None:
    """``KeyError: 'memory' at utils.py:143``: the exception that ended the script and
    the innermost line of the user's code it went through (the user's line, also when a
    fixed copy ran); None without a traceback."""
    found = last_exception(path)
    if found is None:
        return None
    frame, exception = found
    exception = _first_sentence(exception)
    match = _TRACEBACK_FRAME_LINE.match(frame[0]) if frame else None
    if match is None:
        return exception
    file, line = match["file"], int(match["line"])
    source = version.file_at(file)
    if source is None:
        return f"{exception} at {shown_path(file)}:{line}"
    name = display_path if source is version else source.display_path
    if source.is_inserted_line(line):
        return f"{exception} at a line the fix inserted in {name} (after line {source.user_line(line)})"
    return f"{exception} at {name}:{source.user_line(line)}"


_FAILURE_CHARS = 100  # of an exception's message in one line: its first sentence past this


def _first_sentence(exception: str) -> str:
    """``RuntimeError: Found no NVIDIA driver on your system.`` of a long message."""
    if len(exception) <= _FAILURE_CHARS:
        return exception
    end = exception.find(". ")
    return exception[: end + 1] if 0 < end < _FAILURE_CHARS * 2 else exception[: _FAILURE_CHARS - 3] + "..."


_TRACEBACK_FRAME_LINE = re.compile(r'^  File "(?P<file>[^"]*)", line (?P<line>\d+)')


def last_exception(path: Path) -> tuple[list[str], str] | None:
    """The last traceback in an output file, read a line at a time: the innermost frame
    in the user's code (its ``File`` line and its code line; [] when none) and the
    exception's first line. None when there is no traceback."""
    found = None
    frame: list[str] = []
    in_traceback = in_user_frame = False
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            for raw in bounded_lines(file, _MAX_SHOWN_CHARS):
                line = raw.rstrip("\r\n")
                if line == _TRACEBACK:
                    in_traceback, frame = True, []
                elif not in_traceback:
                    continue
                elif match := _TRACEBACK_FRAME.match(line):
                    user = not _LIBRARY_PATH.search(match["file"])
                    frame = [line] if user else frame
                    in_user_frame = user
                elif line.startswith("    ") and frame and in_user_frame and len(frame) == 1:
                    frame.append(line)
                elif line and not line.startswith(" "):
                    # The exception (or "During handling of the above exception...",
                    # which a later traceback replaces).
                    found, in_traceback = (frame, line), False
    except OSError:
        return None
    return found


class _Echo:
    """Copy what the child has written to its output files so far to ``target``."""

    def __init__(self, paths: list[Path], target: TextIO | None) -> None:
        self._paths = paths
        self._target = target
        self._offsets = {path: 0 for path in paths}
        # A read may end inside a multi-byte character.
        self._decoders = {path: codecs.getincrementaldecoder("utf-8")("replace") for path in paths}

    def pump(self) -> None:
        if self._target is None:
            return
        for path in self._paths:
            try:
                with open(path, "rb") as file:
                    file.seek(self._offsets[path])
                    while data := file.read(_ECHO_CHUNK):
                        self._offsets[path] += len(data)
                        self._target.write(self._decoders[path].decode(data))
            except OSError:
                continue
            self._target.flush()
