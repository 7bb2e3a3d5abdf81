"""The command line's entry point (``xlalint``, ``python -m xlalint``): :func:`main`.

Exit status: 0 no findings (or ``--exit-zero``), 1 findings remain, 2 a usage or
configuration error, a file that cannot be read or parsed, or an internal error.

The commands, their options and their help are the typer app of ``cli_app.py``. A plain
``check`` (files and the options of :data:`FLAGS`, :data:`LISTS` and :data:`VALUES`,
each as its own word: what pre-commit runs on every commit) is read here and run
without importing typer, whose import and command tree were a quarter of a one-file
check. It reaches ``cli_run.run`` with the very arguments the app would pass it (a test
holds the two parsers to that); anything else (help, another command, an option not
listed, a value that starts with ``-`` or that click would refuse) goes to the app,
which parses and reports it as always.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from xlalint import output
from xlalint.engine.collector import collect_less_often, one_shot

#: ``check``'s flags the quick parse reads: the keyword of ``cli_run.run`` each sets, and to what.
FLAGS: dict[str, tuple[str, bool]] = {
    "--exit-zero": ("exit_zero", True),
    "--no-cache": ("no_cache", True),
    "-q": ("quiet", True),
    "--quiet": ("quiet", True),
    "--statistics": ("statistics", True),
    "--show-fixes": ("show_fixes", True),
    "--force-exclude": ("force_exclude", True),
    "--isolated": ("isolated", True),
    "--exit-non-zero-on-fix": ("exit_non_zero_on_fix", True),
    "--unsafe-fixes": ("unsafe", True),
    "--no-unsafe-fixes": ("unsafe", False),
    "--follow-imports": ("follow_imports", True),
    "--no-follow-imports": ("follow_imports", False),
}
#: Its options that may be repeated (each value is kept, in order).
LISTS = {
    "--select": "select",
    "--ignore": "ignore",
    "--extend-select": "extend_select",
    "--config": "config",
    "--extend-exclude": "extend_exclude",
    "--exclude": "exclude",
}
#: Its options with one value (the last one given counts, as in click).
VALUES = {
    "--output-format": "output_format",
    "--target-version": "target_version",
    "--target-runtime": "target_runtime",
}
#: The environment variable ``--output-format`` falls back to (``cli_app``'s ``envvar``).
OUTPUT_FORMAT_VARIABLE = "XLALINT_OUTPUT_FORMAT"


def plain_check(args: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The keyword arguments of ``cli_run.run`` for the command line ``args`` (without
    the program's name) when it is a plain ``check``, else None (the typer app's to read)."""
    if not args or args[0] != "check" or os.name == "nt":  # Windows: click expands globs in args
        return None
    if any(name.startswith("_") and name.endswith("_COMPLETE") and value for name, value in environ.items()):
        return None  # a shell's completion request, which click answers
    chosen: dict[str, Any] = {}
    lists: dict[str, list[str]] = {}
    paths: list[str] = []
    words = iter(args[1:])
    for word in words:
        if word == "--":
            paths.extend(words)
            break
        if word == "-":
            return None  # stdin
        if not word.startswith("-"):
            paths.append(word)
            continue
        if word in FLAGS:
            key, value = FLAGS[word]
            chosen[key] = value
            continue
        option, equals, value = word.partition("=")
        if option not in LISTS and option not in VALUES:
            return None
        if not equals:
            value = next(words, None)
            if value is None or value.startswith("-"):
                return None  # click takes such a word as the value; said by the app
        if option in LISTS:
            lists.setdefault(LISTS[option], []).append(value)
        else:
            chosen[VALUES[option]] = value
    if "output_format" not in chosen and environ.get(OUTPUT_FORMAT_VARIABLE):
        chosen["output_format"] = environ[OUTPUT_FORMAT_VARIABLE]
    from xlalint.cli_run import OutputFormat  # here: what `--version` or `rule` runs needs none of it

    output_format = None
    if "output_format" in chosen:
        try:
            output_format = OutputFormat(chosen["output_format"])
        except ValueError:
            return None  # not a format: the app says which are
    # Every keyword as the app's `check` passes it, unset ones at its defaults.
    return {
        "paths": paths or None,
        "fix": False,
        "unsafe": chosen.get("unsafe"),
        "diff": False,
        "select": lists.get("select"),
        "ignore": lists.get("ignore"),
        "extend_select": lists.get("extend_select"),
        "output_format": output_format,
        "statistics": chosen.get("statistics", False),
        "exit_zero": chosen.get("exit_zero", False),
        "show_fixes": chosen.get("show_fixes", False),
        "stdin_filename": None,
        "target_version": chosen.get("target_version"),
        "config": lists.get("config"),
        "no_cache": chosen.get("no_cache", False),
        "quiet": chosen.get("quiet", False),
        "force_exclude": chosen.get("force_exclude", False),
        "add_noqa": False,
        "extend_exclude": lists.get("extend_exclude"),
        "show_files": False,
        "exit_non_zero_on_fix": chosen.get("exit_non_zero_on_fix", False),
        "follow_imports": chosen.get("follow_imports"),
        "exclude": lists.get("exclude"),
        "output_file": None,
        "isolated": chosen.get("isolated", False),
        "watch": False,
        "target_runtime": chosen.get("target_runtime"),
    }


class _PacifyFlush:
    """A standard stream whose flush ignores a reader gone (click's ``PacifyFlushWrapper``)."""

    def __init__(self, wrapped: Any):
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as error:
            if error.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def run_plain_check(arguments: dict[str, Any]) -> None:
    """``cli_run.run(**arguments)``, ended as the app ends a command (click's main and
    ``help_format.Group.main``): always by ``SystemExit``."""
    from xlalint.cli_run import run

    try:
        run(**arguments)
    except EOFError:
        print(file=sys.stderr, flush=True)
        print("Aborted!", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except OSError as error:
        if error.errno != errno.EPIPE:
            raise
        sys.stdout = _PacifyFlush(sys.stdout)  # type: ignore[assignment]
        sys.stderr = _PacifyFlush(sys.stderr)  # type: ignore[assignment]
        raise SystemExit(1) from None
    raise SystemExit(0)


def main() -> None:
    collect_less_often()
    one_shot()
    output.watch_stdout()
    from xlalint.engine import memory

    try:
        memory.budget()  # every command's limits follow it: a bad one is a usage error first
    except memory.BudgetError as error:
        output.echo(output.error_line(str(error)), err=True)
        sys.exit(output.USAGE_EXIT)
    try:
        try:
            arguments = plain_check(sys.argv[1:], os.environ)
            if arguments is not None:
                run_plain_check(arguments)
            from xlalint.cli_app import app

            app()
        finally:
            output.flush_stdout()  # a failed write must fail here, not at the interpreter's exit
    except KeyboardInterrupt:
        output.echo("xlalint: interrupted", err=True)
        sys.exit(130)
    except output.OutputError as error:
        # A full disk: one line and a usage-error status, not a traceback and exit 1
        # (which reads as "findings"). A reader gone (`| head`) stopped reading on purpose:
        # no line for that.
        output.silence_stdout()
        if error.errno != errno.EPIPE:
            output.echo(output.error_line(output.message(error)), err=True)
        sys.exit(output.USAGE_EXIT)


def __getattr__(name: str) -> Any:
    """The app and its commands (``from xlalint.cli import app``), imported on first use
    (not for the import system's questions: ``__path__``, ``__spec__``...)."""
    if not name.startswith("__"):
        from xlalint import cli_app

        if hasattr(cli_app, name):
            return getattr(cli_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
