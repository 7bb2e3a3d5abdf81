"""``--help`` as ruff's: the command list shows each command's first paragraph whole
(click cuts it at the terminal width with "..."), and a usage line names a required
argument ``SCRIPT``, not typer's ``{SCRIPT}``.

Usage errors (an unknown option or command, a bad value) are printed in the one style
every other user error has, ``xlalint: error: <one line>``, exit status 2, with "did
you mean" for a near miss: not click's usage block and ``Error:`` line.
"""

from __future__ import annotations

import inspect
import re
import sys
from typing import Any

# typer 0.28 carries its own copy of click (typer._click): its exceptions are the ones
# raised; the context and formatter are whichever click typer uses.
from typer._click import core as click_core
from typer._click import exceptions as click_errors
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import Abort

from xlalint.engine.config import did_you_mean
from xlalint.output import USAGE_EXIT, error_line

_INVALID_CHOICE = re.compile(r"^(['\"])(?P<value>.*?)\1 is not one of ")


def usage_message(error: Any) -> str:
    """What a click usage error says, with the near miss it knows of, worded as the
    CLI's own errors are (lower case, no final period)."""
    if isinstance(error, click_errors.NoSuchOption):
        hint = f" (did you mean `{error.possibilities[0]}`?)" if error.possibilities else ""
        return f"unknown option `{error.option_name}`{hint}"
    message = error.format_message().rstrip(".")
    message = message[:1].lower() + message[1:]
    message = _without_unused_envvar(error, message)
    if isinstance(error, click_errors.BadParameter) and error.param is not None:
        choices = getattr(error.param.type, "choices", None)
        found = _INVALID_CHOICE.match(error.message)
        if choices and found:
            names = [getattr(choice, "value", choice) for choice in choices]
            return message + did_you_mean(found["value"], names)
    return message


def _without_unused_envvar(error: Any, message: str) -> str:
    """click names an option's environment variable in its error (`'--output-format'
    (env var: 'XLALINT_OUTPUT_FORMAT')`) wherever the value came from: said only when
    the value came from there."""
    param, ctx = getattr(error, "param", None), getattr(error, "ctx", None)
    envvar = getattr(param, "envvar", None)
    if not isinstance(envvar, str) or ctx is None or param is None or param.name is None:
        return message
    if ctx.get_parameter_source(param.name) is click_core.ParameterSource.ENVIRONMENT:
        return message
    return message.replace(f" (env var: '{envvar}')", "")


class Command(TyperCommand):
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


class Group(TyperGroup):
    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            text = inspect.cleandoc(command.short_help or command.help or "")
            rows.append((name, text.split("\n\n", 1)[0].replace("\n", " ")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except click_errors.UsageError as error:
            if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
                raise click_errors.UsageError(
                    f"unknown command `{args[0]}`{did_you_mean(args[0], self.list_commands(ctx))}", ctx
                ) from None
            raise error

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """As click's, but a usage error is one ``xlalint: error:`` line (exit 2);
        a bare ``xlalint`` still prints the help."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            result = super().main(*args, standalone_mode=False, **kwargs)
        except click_errors.NoArgsIsHelpError as error:
            error.show()
            sys.exit(USAGE_EXIT)
        except click_errors.UsageError as error:
            print(error_line(usage_message(error)), file=sys.stderr)
            sys.exit(USAGE_EXIT)
        except click_errors.ClickException as error:
            print(error_line(error.format_message()), file=sys.stderr)
            sys.exit(error.exit_code)
        except Abort:
            print("Aborted!", file=sys.stderr)
            sys.exit(1)
        # Without standalone mode click returns a command's exit status (typer.Exit's).
        sys.exit(result if isinstance(result, int) else 0)
