"""The values a read of a local name can see: the last assignment to it on each path
through the statements before the read, in its function (or module).

Only straight-line blocks, ``if``/``else``, ``with`` and loops whose body assigns the name
plainly are followed; anything else (a parameter, a loop-carried value read in the loop,
``try``, a tuple target, a ``for`` target) leaves the answer unknown. The tensor flow asks
it so that ``n = n.item()`` on every path before a read makes ``n`` a number there.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from enum import Enum

from xlalint.linter.semantic import enclosing_statement, parent
from xlalint.linter.values import DEFINITIONS

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_BLOCKS = ("body", "orelse", "finalbody")
# Statements whose blocks a loop's assignments are looked for in.
_COMPOUND = (ast.If, ast.With, ast.AsyncWith, *_LOOPS, ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


class _Paths(Enum):
    ASSIGNED = "every path assigns it"
    THROUGH = "some path leaves it as it was before"
    UNKNOWN = "not followed"


def reaching_values(read: ast.Name) -> list[ast.expr] | None:
    """The values assigned by the last assignments to ``read``'s name on the paths that
    reach it (for ``n += v``, ``v`` and the values before it); None when not known."""
    name = read.id
    current = enclosing_statement(read)
    if current is None or (isinstance(current, ast.While) and _within(read, current.test)):
        return None  # a `while` test also runs after the body
    values: list[ast.expr] = []
    while True:
        owner = parent(current)
        block = _block_of(owner, current)
        if block is None:
            return None
        paths = _scan(reversed(block[: block.index(current)]), name, values)
        if paths is _Paths.ASSIGNED:
            return values
        if paths is _Paths.UNKNOWN:
            return None
        if isinstance(owner, (*DEFINITIONS, ast.Module)):
            return None  # a parameter, a global: set elsewhere
        if isinstance(owner, _LOOPS) and name in _assigned_names(owner):
            return None  # the previous iteration's value
        if not isinstance(owner, (ast.If, *_LOOPS, ast.With, ast.AsyncWith)) or name in _header_names(owner):
            return None
        current = owner


def _scan(statements, name: str, values: list[ast.expr]) -> _Paths:
    """Walk ``statements`` (latest first) for the last assignments to ``name``."""
    for stmt in statements:
        if name not in _assigned_names(stmt):
            continue
        value = _plain_value(stmt, name)
        if value is not None:
            values.append(value)
            if isinstance(stmt, ast.AugAssign):
                continue  # `n += v` adds to the value before it
            return _Paths.ASSIGNED
        if isinstance(stmt, ast.If) and name not in _header_names(stmt):
            branches = [_scan(reversed(stmt.body), name, values), _scan(reversed(stmt.orelse), name, values)]
            if _Paths.UNKNOWN in branches:
                return _Paths.UNKNOWN
            if branches == [_Paths.ASSIGNED, _Paths.ASSIGNED]:
                return _Paths.ASSIGNED
            continue
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and name not in _header_names(stmt):
            paths = _scan(reversed(stmt.body), name, values)
            if paths is not _Paths.THROUGH:
                return paths
            continue
        if isinstance(stmt, _LOOPS) and name not in _header_names(stmt):
            # The body runs any number of times: each plain assignment in it may be last.
            if not _loop_values(stmt, name, values):
                return _Paths.UNKNOWN
            continue
        return _Paths.UNKNOWN
    return _Paths.THROUGH


def _loop_values(loop: ast.For | ast.AsyncFor | ast.While, name: str, values: list[ast.expr]) -> bool:
    """Add the values every assignment to ``name`` in ``loop`` binds; False when one is not
    a plain ``name = v``/``name += v``."""
    for node in _walk_statements([*loop.body, *loop.orelse]):
        if name not in _assigned_names(node):
            continue
        if isinstance(node, _COMPOUND):
            if name in _header_names(node):
                return False
            continue  # its blocks are walked
        value = _plain_value(node, name)
        if value is None:
            return False
        values.append(value)
    return True


def _plain_value(stmt: ast.stmt, name: str) -> ast.expr | None:
    """The value of ``name = v``, ``name: T = v``, ``name += v`` (names as targets), else None."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    else:
        return None
    plain = all(isinstance(t, ast.Name) for t in targets) and any(t.id == name for t in targets)  # type: ignore[attr-defined]
    return stmt.value if plain else None


def _walk_statements(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements in ``statements`` and in the blocks of the compound ones among them."""
    stack = list(statements)
    while stack:
        stmt = stack.pop()
        yield stmt
        if isinstance(stmt, _COMPOUND):
            for field in _BLOCKS:
                stack.extend(getattr(stmt, field, None) or [])
            for handler in getattr(stmt, "handlers", None) or []:
                stack.extend(handler.body)


def _assigned_names(node: ast.AST) -> frozenset[str]:
    """Names ``node`` binds, not inside nested definitions or comprehensions (kept on the
    node: a read asks of each statement before it)."""
    found = getattr(node, "_xlalint_assigned_names", None)
    if found is None:
        names = set()
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, ast.Name) and isinstance(current.ctx, (ast.Store, ast.Del)):
                names.add(current.id)
            if current is not node and isinstance(current, (*DEFINITIONS, ast.comprehension)):
                if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(current.name)
                continue
            stack.extend(ast.iter_child_nodes(current))
        found = frozenset(names)
        node._xlalint_assigned_names = found  # type: ignore[attr-defined]
    return found


def _header_names(stmt: ast.AST) -> frozenset[str]:
    """Names bound by a compound statement's header: a ``for`` target, ``with ... as``, a
    walrus in a test."""
    header = [getattr(stmt, field) for field in ("target", "test", "iter") if getattr(stmt, field, None) is not None]
    header += list(getattr(stmt, "items", []))
    return frozenset().union(*(_assigned_names(h) for h in header)) if header else frozenset()


def _block_of(owner: ast.AST | None, stmt: ast.stmt) -> list[ast.stmt] | None:
    for field in _BLOCKS:
        block = getattr(owner, field, None)
        if isinstance(block, list) and any(s is stmt for s in block):
            return block
    return None


def _within(node: ast.AST, root: ast.AST) -> bool:
    return any(n is node for n in ast.walk(root))
