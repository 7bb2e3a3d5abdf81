"""The ``xlalint run`` command (typer). Imports nothing heavy: the harness modules are
imported when the command runs, so ``xlalint check`` never pays for them, and the
parent process never imports torch (only the child does)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from xlalint.help_format import Command

RUN_HELP = "\n\n".join(
    [
        "Run SCRIPT on torch_xla and report compilations, executions, syncs, host transfers "
        "and their causes (file:line, joined to the lint findings).",
        "By default fixed temporary copies of SCRIPT and of the local modules it imports "
        "(from its folder and the project root, as `check` follows them) are run; your files "
        "are never changed. "
        "Arguments after -- go to the script: xlalint run train.py --compare -- --epochs 1",
        "Exit status: 0 the run(s) succeeded; 1 the script failed, was killed or timed out; "
        "2 usage or environment error (torch/torch_xla missing or mismatched, device "
        "unavailable); 130 interrupted.",
    ]
)


class DeviceChoice(str, Enum):
    auto = "auto"
    cpu = "cpu"
    tpu = "tpu"
    cuda = "cuda"


#: ``session.DEFAULT_TIMEOUT_S``, repeated here so that ``--help`` imports no harness
#: module (tests/harness/test_report.py checks that they agree).
DEFAULT_TIMEOUT_S = 600.0


def _step_count(value: int | None) -> int | None:
    # A callback, not `min=0`: click would print its range (`[x>=0]`) in the help.
    if value is not None and value < 0:
        raise typer.BadParameter("must be 0 (no limit) or more steps")
    return value


def _timeout_seconds(value: float) -> float:
    if not value >= 0:  # also NaN
        raise typer.BadParameter("must be 0 (no timeout) or more seconds")
    return value


def register(app: typer.Typer) -> None:
    """Add the ``run`` command to the xlalint app."""

    @app.command("run", help=RUN_HELP, cls=Command)
    def run_command(
        script: Annotated[
            Path,
            typer.Argument(
                exists=True,
                dir_okay=False,
                readable=True,
                metavar="SCRIPT",
                help="The training script.",
                show_default=False,
            ),
        ],
        script_args: Annotated[
            list[str] | None,
            typer.Argument(metavar="SCRIPT_ARGS", help="Arguments for the script, after --."),
        ] = None,
        fix: Annotated[
            bool,
            typer.Option("--fix/--no-fix", help="Run fixed temporary copies (default) or the script as is."),
        ] = True,
        unsafe_fixes: Annotated[
            bool, typer.Option("--unsafe-fixes", help="Also apply unsafe fixes to the copy.")
        ] = False,
        compare: Annotated[
            bool,
            typer.Option("--compare", help="Run the original and the fixed script and compare them."),
        ] = False,
        device: Annotated[
            DeviceChoice, typer.Option("--device", case_sensitive=False, help="The XLA device.")
        ] = DeviceChoice.auto,
        timeout: Annotated[
            float,
            typer.Option(
                "--timeout",
                callback=_timeout_seconds,
                metavar="SECONDS",
                help=(
                    "Kill each run after this many seconds; 0: no timeout. The default, 600, "
                    "leaves room for a real model's first compilations on a CPU (minutes) "
                    "and still ends a run that hangs."
                ),
            ),
        ] = DEFAULT_TIMEOUT_S,
        steps: Annotated[
            int | None,
            typer.Option(
                "--steps",
                callback=_step_count,
                metavar="N",
                help=(
                    "Stop each run after N optimizer steps (through the script's exit, so its "
                    "numbers are complete); 0: no limit. Default: 20 with --compare, no limit otherwise."
                ),
                show_default=False,
            ),
        ] = None,
        bisect: Annotated[
            bool,
            typer.Option(
                "--bisect",
                help=(
                    "Run as --compare does; when the fixed script crashes or its loss leaves the "
                    "CPU reference's where the port ran, re-run subsets of the fixes (each run "
                    "bounded by --steps) and name the fix to blame."
                ),
            ),
        ] = False,
        json_file: Annotated[
            Path | None,
            typer.Option("--json", dir_okay=False, metavar="FILE", help="Also write the report as JSON to this file."),
        ] = None,
        html_file: Annotated[
            Path | None,
            typer.Option(
                "--html",
                dir_okay=False,
                metavar="FILE",
                help="Also write the report as one HTML page (per-step charts, no external assets).",
            ),
        ] = None,
        follow_imports: Annotated[
            bool | None,
            typer.Option(
                "--follow-imports/--no-follow-imports",
                help="Also fix the local modules the script imports, as `check` follows them "
                "(default: on; overrides `follow-imports` in the config).",
                show_default=False,
            ),
        ] = None,
    ) -> None:
        from xlalint.harness.session import RunOptions, run

        status = run(
            RunOptions(
                script=script,
                fix=fix,
                unsafe_fixes=unsafe_fixes,
                compare=compare,
                device=device.value,
                timeout_s=timeout or None,
                steps=steps,
                bisect=bisect,
                json_path=json_file,
                html_path=html_file,
                script_args=list(script_args or []),
                follow_imports=follow_imports,
            )
        )
        raise typer.Exit(status)
