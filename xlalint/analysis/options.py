"""Command-line options: the ``parser.add_argument(...)`` calls of a module, the attribute
each sets on the parsed namespace (``--dist-backend`` -> ``args.dist_backend``), its
default, and where the script reads it.

A script written for a GPU often makes its device and its process-group backend options
(``--device`` defaulting to ``"cuda"``, ``--backend`` to ``"nccl"``): the default is
where the value is defined, ``args.device`` is where it is used. Flow-insensitive, like
:mod:`xlalint.analysis.values`: the namespace is any name assigned ``parse_args()``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property

from xlalint.analysis.semantic import Semantic, keyword, method_name, parent, string_value

ADD_ARGUMENT = "add_argument"
# What returns the parsed namespace (``parse_known_args`` first, with the rest).
PARSE_METHODS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args"})


@dataclass(frozen=True)
class CommandLineOption:
    call: ast.Call
    destination: str
    default: ast.expr | None


def option_destination(call: ast.Call) -> str | None:
    """The attribute ``parser.add_argument(...)`` sets: ``dest=``, else the first long
    option (``--dist-backend`` -> ``dist_backend``), else the first option or name."""
    dest = keyword(call, "dest")
    if dest is not None:
        return string_value(dest.value)
    names = [v for v in (string_value(a) for a in call.args) if v]
    chosen = next((n for n in names if n.startswith("--")), names[0] if names else None)
    return chosen.lstrip("-").replace("-", "_") if chosen else None


class CommandLineOptions:
    """The options one module declares and the reads of their values, found on first use."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic

    @cached_property
    def declared(self) -> list[CommandLineOption]:
        found = []
        for call in self.semantic.calls_named(ADD_ARGUMENT):
            destination = option_destination(call)
            if destination is not None and method_name(call) == ADD_ARGUMENT:
                default = keyword(call, "default")
                found.append(CommandLineOption(call, destination, default.value if default is not None else None))
        return found

    def declaring(self, default: ast.AST) -> CommandLineOption | None:
        """The option whose ``default=`` is ``default``."""
        return next((o for o in self.declared if o.default is default), None)

    def read_by(self, node: ast.AST) -> CommandLineOption | None:
        """The option ``node`` (``args.dist_backend``) reads."""
        if not (isinstance(node, ast.Attribute) and self._is_namespace(node.value)):
            return None
        return next((o for o in self.declared if o.destination == node.attr), None)

    def reads(self, option: CommandLineOption) -> list[ast.Attribute]:
        """Every ``<namespace>.<destination>`` read of ``option``'s value."""
        return [
            node
            for node in self.semantic.attributes_named(option.destination)
            if isinstance(node.ctx, ast.Load) and self._is_namespace(node.value)
        ]

    @cached_property
    def _namespaces(self) -> frozenset[str] | None:
        """The names assigned a parsed namespace (``args = parser.parse_args()``, ``args, _ =
        parser.parse_known_args()``); None when the module parses none itself (a
        ``get_args()`` elsewhere): any name but ``self`` may then be it."""
        names = set()
        for call in self.semantic.calls:
            if method_name(call) not in PARSE_METHODS:
                continue
            holder = parent(call)
            if isinstance(holder, ast.Assign) and holder.value is call:
                for target in holder.targets:
                    first = target.elts[0] if isinstance(target, (ast.Tuple, ast.List)) and target.elts else target
                    if isinstance(first, ast.Name):
                        names.add(first.id)
        return frozenset(names) or None

    def _is_namespace(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Name):
            return False
        return node.id in self._namespaces if self._namespaces is not None else node.id != "self"
