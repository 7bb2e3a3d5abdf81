"""`xlalint run`: check the environment, prepare the versions, run them, report.

Exit status of ``xlalint run``:

- 0: every run finished with exit status 0 (with ``--compare``: the fixed run did; the
  reference and the port are baselines, their failures are in the report);
- 1: a run failed: non-zero exit status, killed by a signal, or past ``--timeout``;
- 2: it could not run: usage error, unreadable script, bad config, torch/torch_xla
  missing or mismatched (also when the child fails to import them), the requested
  device unavailable, or an internal error;
- 130: interrupted (Ctrl-C, SIGTERM or SIGHUP); the script's processes are killed first.

If ``xlalint run`` is killed outright (SIGKILL), a watchdog process kills the
script's processes and removes the temporary folder (see ``cleanup.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from xlalint.engine.full_format import use_color
from xlalint.harness import (
    blame,
    cleanup,
    cuda_libraries,
    environment,
    port,
    prepare,
    reference,
    report,
    runner,
    verdict,
    working_copy,
)
from xlalint.harness.environment import INSTALL_HINT, HarnessEnvironmentError
from xlalint.harness.progress import Progress
from xlalint.harness.results import RunResult
from xlalint.help_format import error_line

EXIT_OK = 0
EXIT_SCRIPT_FAILED = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

#: Each run is killed after this long unless ``--timeout`` says otherwise. On a CPU a
#: real model's first compilations take minutes, and the examples here finish in under
#: 15 s on a quiet machine; 10 minutes lets a real script reach its steady state and
#: still ends a run that hangs (a collective waiting for a peer).
DEFAULT_TIMEOUT_S = 600.0
#: ``--compare`` stops each run after this many optimizer steps unless ``--steps`` says
#: otherwise: enough to see compilations settle and the loss move, and a port whose
#: graph grows every step still ends in minutes.
DEFAULT_COMPARE_STEPS = 20
COMPARE_SEED = 0


class UsageError(HarnessEnvironmentError):
    """Options that do not go together."""


@dataclass
class RunOptions:
    script: Path
    fix: bool = True
    unsafe_fixes: bool = False
    compare: bool = False
    device: str = "auto"
    timeout_s: float | None = DEFAULT_TIMEOUT_S  # None: no limit
    json_path: Path | None = None
    html_path: Path | None = None  # the report as an HTML page with per-step charts
    script_args: list[str] = field(default_factory=list)
    #: Fix (and report) the local modules the script imports, as `check` and `fix`
    #: follow them; None: as the config's ``follow-imports`` says (default on).
    follow_imports: bool | None = None
    #: Stop each run after this many optimizer steps; 0: no limit; None: the default
    #: (``DEFAULT_COMPARE_STEPS`` with ``--compare``, no limit otherwise).
    steps: int | None = None
    #: ``--bisect``: the three runs of --compare, then, when the fixed run crashed or
    #: diverged, the fix to blame (--compare bisects too when the port ran well).
    bisect: bool = False

    @property
    def max_steps(self) -> int | None:
        if self.steps is None:
            return DEFAULT_COMPARE_STEPS if self.compare else None
        return self.steps or None


def run(options: RunOptions, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Everything ``xlalint run`` does; returns its exit status."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        with _sigterm_as_interrupt():
            harness_report = run_harness(options, stderr)
    except HarnessEnvironmentError as error:
        stderr.write(error_line(str(error)) + "\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        stderr.write("xlalint run: interrupted; the script's processes were killed\n")
        return EXIT_INTERRUPTED
    stdout.write(report.format_text(harness_report, color=use_color(stdout)))
    stdout.flush()
    for path, write in ((options.json_path, report.write_json), (options.html_path, _write_html)):
        if path is None:
            continue
        try:
            write(harness_report, path)
        except OSError as error:
            stderr.write(error_line(f"cannot write {path}: {error}") + "\n")
            return EXIT_ERROR
    runs = [result for result in harness_report.runs.values() if not result.skipped]
    for result in runs:
        for warning in result.warnings:
            stderr.write(f"warning: the {result.description} run: {warning}\n")
    import_errors = [run.import_error for run in runs if run.import_error]
    if import_errors:
        stderr.write(
            error_line(f"torch_xla cannot be imported in the script's process ({import_errors[0]}): {INSTALL_HINT}")
            + "\n"
        )
        return EXIT_ERROR
    # With --compare's three runs the exit status is the fixed script's: the reference
    # and the port are baselines, whose failures the report explains.
    judged = [harness_report.runs["fixed"]] if harness_report.verdict and "fixed" in harness_report.runs else runs
    if not all(run.ok for run in judged):
        for run in judged:
            if not run.ok:
                stderr.write(f"xlalint run: the {run.description} run {run.status_line()}\n")
        return EXIT_SCRIPT_FAILED
    return EXIT_OK


def run_harness(options: RunOptions, stderr: TextIO) -> report.HarnessReport:
    """Run the script as the options say and return the report (nothing printed to
    stdout). Raises ``HarnessEnvironmentError`` when it cannot run."""
    if options.bisect:
        if not options.fix:
            raise UsageError("--bisect looks for the fix that broke the run; drop --no-fix")
        options = replace(options, compare=True)
    if options.compare and not options.fix:
        raise UsageError("--compare runs the original and the fixed script; drop --no-fix")
    if options.timeout_s is not None and options.timeout_s <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if options.steps is not None and options.steps < 0:
        raise UsageError("--steps must be 0 (no limit) or a number of optimizer steps")
    script = options.script
    display_path = str(script)
    if not script.is_file():
        raise UsageError(f"{display_path}: no such file")
    if script.suffix.lower() == ".ipynb":
        # Its JSON is valid Python (a dict), which ran and did nothing. A notebook's
        # cells run in a kernel, with its magics and state: not what `run` measures.
        raise UsageError(
            f"{display_path} is a notebook: `xlalint run` runs Python scripts. Export it "
            f"(jupyter nbconvert --to script {display_path}) and run the .py; "
            "`xlalint check`/`fix` read notebooks as they are"
        )
    try:
        script_file = prepare.read_user_file(script, display_path, Path(script.name))
    except (OSError, SyntaxError, UnicodeDecodeError) as error:
        raise HarnessEnvironmentError(f"{display_path}: cannot read: {error}") from error
    modules = _read_local_modules(options, display_path)
    for option, output in (("--json", options.json_path), ("--html", options.html_path)):
        if output is not None:
            _refuse_output_over_the_program(output, script, option, [m.path for m in modules])

    python = environment.child_python()
    probe = environment.probe_interpreter(python)
    for warning in environment.check_torch_xla(probe):
        stderr.write(f"xlalint run: {warning}\n")
    device = environment.choose_device(options.device, probe, environment.detect_hardware())

    # Folders left by runs that were killed before they could clean up.
    cleanup.remove_stale_temp_folders()
    token = cleanup.new_token()
    watchdog = None
    try:
        with cleanup.temp_folder() as temp:
            workdir = Path(temp)
            watchdog = cleanup.Watchdog(token, workdir)
            device = cuda_libraries.prepare_device(device, python, workdir)
            # On a GPU, --compare measures a CUDA script natively against its XLA port.
            prepared = _prepare_versions(options, script_file, modules, workdir, native_baseline=device.name == "CUDA")
            versions = prepared.versions
            settings = runner.RunSettings(
                python=python,
                device=device,
                hook_dir=runner.write_hook(workdir / "hook"),
                user_script=script,
                display_path=display_path,
                script_args=list(options.script_args),
                timeout_s=options.timeout_s,
                token=token,
                max_steps=options.max_steps,
                # The three runs of --compare on the same seed (the script's own seeding wins).
                seed=COMPARE_SEED if options.compare else None,
                # One run: show the script's output as it goes. Two: a progress line.
                echo_to=None if len(versions) > 1 else stderr,
            )
            ran, working_directory = _run_versions(versions, settings, workdir, stderr)
            made = {**ran, **prepared.skipped_runs}
            runs = {label: made[label] for label in (reference.LABEL, port.LABEL, "original", "fixed") if label in made}
            judged = verdict.judge(runs) if options.compare and port.LABEL in runs else None
            blamed = None
            if judged is not None and prepared.fixed is not None:
                blamed = blame.blame_fixed_run(
                    original=prepared.original,
                    port=prepared.port,
                    fixed=prepared.fixed,
                    user_files=[script_file, *modules],
                    runs=runs,
                    judged=judged,
                    settings=settings,
                    workdir=workdir,
                    unsafe=options.unsafe_fixes,
                    stderr=stderr,
                    forced=options.bisect,
                )
    finally:
        # Only now: if we are killed while the folder is removed, the watchdog ends it.
        if watchdog is not None:
            watchdog.stand_down()

    return report.HarnessReport(
        script=display_path,
        device=device.name,
        torch_xla=probe.torch_xla_version,
        findings=prepared.original.findings,
        runs=runs,
        fix_summary="\n".join(prepared.summaries) or None,
        local_modules=prepared.original.modules,
        comparison_skipped=prepared.comparison_skipped,
        working_directory=working_directory,
        fix_diff=_fix_diff(prepared, [script_file, *modules]),
        verdict=judged,
        blame=blamed,
    )


def _read_local_modules(options: RunOptions, display_path: str) -> list[prepare.UserFile]:
    """The local modules to run fixed, when following imports is on (``--no-follow-imports``
    or ``follow-imports = false`` in the script's config turn it off)."""
    from xlalint.engine.api import settings_for
    from xlalint.engine.config import ConfigError

    try:
        follow = options.follow_imports
        if follow is None:
            follow = settings_for(options.script).follow_imports
        return prepare.read_local_modules(options.script, display_path, follow=follow)
    except ConfigError as error:
        raise HarnessEnvironmentError(f"configuration: {error}") from error


def _fix_diff(prepared: PreparedVersions, user_files: list[prepare.UserFile]) -> str | None:
    """The diff of the user's files against the fixed version that ran (the last)."""
    fixed = prepared.versions[-1]
    if fixed is prepared.original:
        return None
    pairs = [
        (user.display_path, user.source, file.source)
        for user, file in zip(user_files, fixed.files(), strict=True)
        if file.changed
    ]
    return report.unified_diff(pairs) or None


def _write_html(harness_report: report.HarnessReport, path: Path) -> None:
    from xlalint.harness.html_report import write_html

    write_html(harness_report, path)


def _refuse_output_over_the_program(
    output: Path, script: Path, option: str = "--json", modules: list[Path] | None = None
) -> None:
    """``--json`` and ``--html`` must not name the script or one of its local modules (readable or
    not; ``modules``: those found beyond its folder too), under whatever name: a symlink, ``./``,
    another hard link to the file."""
    from xlalint.harness.local_modules import find_local_modules

    try:
        target = os.stat(output)
    except OSError:
        return  # no such file yet: it cannot be one of the program's
    for path in [script, *(module.path for module in find_local_modules(script)), *(modules or [])]:
        with contextlib.suppress(OSError):
            same = os.stat(path)
            if (same.st_dev, same.st_ino) == (target.st_dev, target.st_ino):
                what = "the script" if path == script else f"the script's local module {path}"
                raise UsageError(f"{option} {output} is {what}; write the report to another file")


def _run_versions(
    versions: list[prepare.ScriptVersion], settings: runner.RunSettings, workdir: Path, stderr: TextIO
) -> tuple[dict[str, RunResult], str | None]:
    """The result of each version, and, when they are several, where they ran: each in
    its own copy of the working directory, so that what one writes the next does not
    see (see ``working_copy``)."""
    progress = Progress(stderr) if len(versions) > 1 else None
    runs: dict[str, RunResult] = {}
    copies: list[working_copy.WorkingCopy] = []
    for version in versions:
        if len(versions) > 1:
            copies.append(working_copy.make_working_copy(Path.cwd(), workdir / f"{version.label}-cwd"))
            settings = replace(settings, cwd=copies[-1].path)
        if progress:
            progress.start(version.description)
            settings.on_tick = progress.tick
        # The native baseline runs without XLA's device settings and library folder.
        version_settings = settings
        if version.label == reference.LABEL:
            version_settings = replace(settings, device=reference.DEVICE)
        elif version.native:
            version_settings = replace(settings, device=environment.native_cuda())
        result = runner.execute(version, version_settings, workdir / f"{version.label}-out")
        if progress:
            progress.finish(f"{result.status_line()}, {result.wall_s:.1f} s")
        runs[version.label] = result
    return runs, working_copy.describe(copies, Path.cwd()) if copies else None


@dataclass
class PreparedVersions:
    versions: list[prepare.ScriptVersion]  # what to run, in order
    original: prepare.ScriptVersion  # the user's files as they are, linted
    summaries: list[str]  # one line per fixed version: what its fix did
    #: Why --compare runs only one version (the fix changed nothing), if it does.
    comparison_skipped: str | None = None
    #: The runs of --compare that were not made, and why (as results: status "skipped").
    skipped_runs: dict[str, RunResult] = field(default_factory=dict)
    port: prepare.ScriptVersion | None = None  # --compare's port version
    fixed: prepare.ScriptVersion | None = None  # the version with all the fixes asked for


def _prepare_versions(
    options: RunOptions,
    script: prepare.UserFile,
    modules: list[prepare.UserFile],
    workdir: Path,
    *,
    native_baseline: bool = False,
) -> PreparedVersions:
    """The versions to run: the script and its local modules, as they are or fixed.

    With ``native_baseline`` (the device is a GPU), ``--compare`` on a CUDA script runs
    the original as it is, as plain PyTorch on the GPU: the question is then whether
    the port to XLA pays off. When the fixed version would run the same code as the
    baseline, it runs once and ``comparison_skipped`` says why.
    """
    from xlalint.engine.config import ConfigError

    user_files = [script, *modules]
    skipped_runs: dict[str, RunResult] = {}
    versions: list[prepare.ScriptVersion] = []
    summaries: list[str] = []
    baseline = fixed = None
    try:
        original = prepare.original_version(script, modules)
        if options.compare and native_baseline and prepare.uses_cuda(original):
            original.native = True
            original.description = "original, native CUDA (no XLA)"
            baseline = original
        elif options.compare:
            # The three runs: the original on CPU (the loss to track), the port (the
            # cost to beat), the fix.
            reference_run = reference.reference_version(original)
            if isinstance(reference_run, str):
                skipped_runs[reference.LABEL] = RunResult.skipped_run(
                    reference.LABEL, reference.DESCRIPTION, reference_run
                )
            else:
                versions.append(reference_run)
            baseline = port.port_version(original, user_files, workdir)
            if baseline is not original and any(file.changed for file in baseline.files()):
                summaries.append(report.version_fix_summary(baseline, hint_unsafe=False))
        elif not options.fix:
            baseline = original
        if baseline is not None:
            versions.append(baseline)
        if options.fix:
            fixed = prepare.fixed_version(
                original,
                user_files,
                workdir,
                label="fixed",
                folder="fixed",
                unsafe=options.unsafe_fixes,
                description="fixed",
            )
            summaries.append(report.version_fix_summary(fixed, hint_unsafe=not options.unsafe_fixes))
            versions.append(fixed)
    except ConfigError as error:
        raise HarnessEnvironmentError(f"configuration: {error}") from error
    except Exception as error:  # an engine bug must not look like a script fault
        raise HarnessEnvironmentError(
            f"internal error while linting/fixing {script.display_path}: {type(error).__name__}: {error}"
        ) from error
    skipped = None
    if (
        options.compare
        and baseline is not None
        and fixed is not None
        and not baseline.native
        and fixed.runs_the_same_code_as(baseline)
    ):
        # Two runs of the same code measure only noise (and cost twice the time).
        skipped = f"the fixed script is the {baseline.description} (the fix changed nothing more), so it ran once"
        if baseline is original:
            skipped = "the fixed script is the original (the fix changed nothing), so it ran once"
        versions = [version for version in versions if version is not baseline]
        if baseline.label == port.LABEL:
            skipped_runs[port.LABEL] = RunResult.skipped_run(
                port.LABEL, baseline.description, "the fixed script is the port (the fix changed nothing more)"
            )
    return PreparedVersions(
        versions, original, summaries, skipped, skipped_runs, port=baseline if options.compare else None, fixed=fixed
    )


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (the terminal closed) to `xlalint run` clean up like Ctrl-C
    (the runner kills the script's processes on the way out)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signals = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {signum: signal.signal(signum, interrupt) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
