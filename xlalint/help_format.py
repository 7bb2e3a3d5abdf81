"""``--help`` as ruff's: the command list shows each command's first paragraph whole
(click cuts it at the terminal width with "..."), and a usage line names a required
argument ``SCRIPT``, not typer's ``{SCRIPT}``."""

from __future__ import annotations

import inspect
from typing import Any

from typer.core import TyperCommand, TyperGroup

# Not `import click`: typer 0.28 carries its own copy (typer._click); the context and
# formatter are whichever click typer uses.


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
