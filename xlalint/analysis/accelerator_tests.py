"""Tests of the accelerator: what ``torch.cuda.is_available()`` (or a flag built on it)
decides, what its value is once the port treats the XLA device as available, and which
code it guards.

A test is a value, not a line: ``if not torch.cuda.is_available() or not flash: return``
guards everything after it, and ``not True or not flash`` is no port of it. This module
says what a test becomes when the call is True (a constant, or the operands left:
``not flash``), which branch of an ``if`` then runs, and which statements run only
when the test lets them (the body, the ``else``, and what follows an early exit).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from xlalint.analysis.semantic import ancestors, dotted_name, enclosing_statement, parent

# The statements that leave a block: an ``if`` whose body ends in one guards what follows.
EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


@dataclass(frozen=True)
class Remaining:
    """What is left of a boolean operation once some operands are decided: the others,
    joined by the same operator (``not flash`` of ``not avail or not flash``)."""

    operator: ast.boolop
    operands: tuple[ast.expr | Remaining, ...]


# What an expression becomes: a constant, the expression unchanged, what remains of it,
# or None (the call is somewhere this module does not evaluate: no rewrite).
Value = bool | ast.expr | Remaining | None


def test_root(call: ast.AST) -> ast.expr:
    """The outermost expression that holds ``call`` through ``not``, ``and``, ``or`` only:
    the whole test that the call's value decides."""
    root = call
    for holder in ancestors(call):
        if isinstance(holder, ast.BoolOp) or (isinstance(holder, ast.UnaryOp) and isinstance(holder.op, ast.Not)):
            root = holder
            continue
        break
    return root  # type: ignore[return-value]


def assume(node: ast.expr, truthy: Callable[[ast.AST], bool], value: bool = True) -> Value:
    """``node`` once every sub-expression ``truthy`` accepts is ``value`` (True unless
    told): ``True``/``False``, ``node`` itself when nothing in it is decided, a
    ``Remaining``, or None."""
    return _assume(node, truthy, value)


def _assume(node: ast.expr, decided: Callable[[ast.AST], bool], known: bool) -> Value:
    if decided(node):
        return known
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _assume(node.operand, decided, known)
        if isinstance(value, bool):
            return not value
        return node if value is node.operand else None
    if isinstance(node, ast.BoolOp):
        values = [_assume(operand, decided, known) for operand in node.values]
        if any(v is None for v in values):
            return None
        if all(v is operand for v, operand in zip(values, node.values)):
            return node
        absorbing = isinstance(node.op, ast.Or)  # True decides an `or`, False an `and`
        if any(v is absorbing for v in values):
            return absorbing
        left = tuple(v for v in values if not isinstance(v, bool))
        if not left:
            return not absorbing
        if len(left) == 1:
            return left[0]
        return Remaining(node.op, left)  # type: ignore[arg-type]
    if any(decided(sub) for sub in ast.walk(node)):
        return None  # inside a comparison, a call, ...: not evaluated here
    return node


def block_of(stmt: ast.stmt) -> list[ast.stmt] | None:
    """The block (a body, an ``else``, ...) that holds ``stmt``."""
    owner = parent(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(owner, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    return None


def is_elif(stmt: ast.If, lines: list[str]) -> bool:
    """``stmt`` is an ``elif`` clause (its text starts with ``elif``), not a statement."""
    return lines[stmt.lineno - 1].lstrip().startswith("elif")


def guarded(test: ast.If | ast.IfExp) -> Iterator[ast.AST]:
    """What runs, or not, by ``test``: its branches, and for an ``if`` whose body ends in
    an exit (``if not torch.cuda.is_available(): return``) what follows it in its block."""
    if isinstance(test, ast.IfExp):
        yield test.body
        yield test.orelse
        return
    yield from test.body
    yield from test.orelse
    if test.body and isinstance(test.body[-1], EXITS):
        block = block_of(test)
        if block is not None:
            index = next(i for i, s in enumerate(block) if s is test)
            yield from block[index + 1 :]


def flag_set_by(call: ast.AST) -> str | None:
    """``use_cuda`` / ``args.cuda`` for ``<flag> = <a boolean built on call>``: through
    ``and``/``or``/``not``, or ``True if <call> else False``."""
    stmt = enclosing_statement(call)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target = stmt.target
    else:
        return None
    child: ast.AST = call
    for holder in ancestors(call):
        if holder is stmt:
            break
        if isinstance(holder, ast.IfExp):
            if holder.test is not child or not (_is_bool(holder.body) and _is_bool(holder.orelse)):
                return None
        elif not isinstance(holder, (ast.BoolOp, ast.UnaryOp)):
            return None
        child = holder
    return dotted_name(target)


def _is_bool(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, bool)
