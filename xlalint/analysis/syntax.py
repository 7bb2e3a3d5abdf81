"""Small questions about the syntax of a call or a statement that rules and fixes ask:
which argument a call passes for a parameter, whether it passes ``*args``/``**kwargs``,
whether a statement can be removed without taking a neighbour with it."""

from __future__ import annotations

import ast
from bisect import bisect_left

from xlalint.analysis.semantic import keyword, parent

# Expressions that need no parentheses in front of `.attr`.
ATOMIC = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Subscript,
    ast.Constant,
    ast.List,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
    ast.JoinedStr,
)


def argument(call: ast.Call, position: int, name: str) -> ast.AST | None:
    """The argument of ``call`` for the parameter ``name`` at ``position``."""
    kw = keyword(call, name)
    if kw is not None:
        return kw.value
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if len(positional) == len(call.args) and position < len(positional):
        return positional[position]
    return None


def has_star_args(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords)


def is_alone_on_its_lines(stmt: ast.stmt) -> bool:
    """True unless ``stmt`` shares a line with another statement (``a(); b()``):
    removing a statement removes its whole line."""
    container = parent(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        siblings = getattr(container, field, None)
        if not isinstance(siblings, list):
            continue
        # A block's statements are in source order and do not overlap: only a neighbour
        # can share a line with it (found by bisection, so that a long block of such
        # statements costs no more than linear time).
        i = bisect_left(siblings, (stmt.lineno, stmt.col_offset), key=lambda s: (s.lineno, s.col_offset))
        if i < len(siblings) and siblings[i] is stmt:
            return not any(
                other.lineno <= (stmt.end_lineno or stmt.lineno) and stmt.lineno <= (other.end_lineno or other.lineno)
                for other in (*siblings[max(i - 1, 0) : i], *siblings[i + 1 : i + 2])
            )
    return True


def whole_statement(call: ast.Call) -> ast.Expr | None:
    """The expression statement that is nothing but ``call``, if it can be removed."""
    stmt = parent(call)
    if isinstance(stmt, ast.Expr) and is_alone_on_its_lines(stmt):
        return stmt
    return None


def is_self_attribute(node: ast.AST) -> bool:
    """``self.<attr>``."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
