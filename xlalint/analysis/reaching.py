"""Program order: what a name holds where it is read, which branch a node runs under, and
which of two nodes of the module runs first.

- :func:`reaching_values`: the last assignment to a local name on each path through the
  statements before the read, in its function (or module). Only straight-line blocks,
  ``if``/``else``, ``with`` and loops whose body assigns the name plainly are followed;
  anything else (a parameter, a loop-carried value read in the loop, ``try``, a tuple
  target, a ``for`` target) leaves the answer unknown. A name reassigned to another value
  holds that value from there on (``loader = DataLoader(eval_ds)`` after the training
  loop is the evaluation loader). The tensor flow asks it so that ``n = n.item()`` on
  every path before a read makes ``n`` a number there.
- Correlated branches: a read under ``if args.use_fsdp:`` (or in its ``else``) sees only
  the matching branch of an earlier ``if args.use_fsdp:`` of its function, when the test
  is the same expression over names not reassigned between the two and calls nothing
  (:func:`branch_facts`, :func:`decided_branch`).
- :func:`runs_before`: whether one node of the module runs before another, following the
  calls of the module's functions (a wrap in a helper that ``__init__`` calls before it
  builds the optimizer comes first, whatever the line numbers), a few calls deep.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Iterator
from enum import Enum

from xlalint.analysis.semantic import Semantic, enclosing_statement, parent
from xlalint.analysis.values import DEFINITIONS, FUNCTIONS, call_sites, walk_scope

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_BLOCKS = ("body", "orelse", "finalbody")
# Statements whose blocks a loop's assignments are looked for in.
_COMPOUND = (ast.If, ast.With, ast.AsyncWith, *_LOOPS, ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


# How many calls up :func:`runs_before` follows from a node to the functions that call it.
_CALL_DEPTH = 4


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
    facts = branch_facts(read)
    while True:
        owner = parent(current)
        place = _place_in_block(owner, current)
        if place is None:
            return None
        block, position = place
        paths = _scan(block.assigning_before(position, name), name, values, facts)
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


def _scan(statements, name: str, values: list[ast.expr], facts: Facts) -> _Paths:
    """Walk ``statements`` (latest first) for the last assignments to ``name``; an ``if``
    whose test ``facts`` decide is followed into the branch taken only."""
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
            taken = decided_branch(stmt, facts)
            if taken is not None:
                paths = _scan(_assigning_in(stmt, "body" if taken else "orelse", name), name, values, facts)
                if paths is not _Paths.THROUGH:
                    return paths
                continue
            branches = [
                _scan(_assigning_in(stmt, "body", name), name, values, facts),
                _scan(_assigning_in(stmt, "orelse", name), name, values, facts),
            ]
            if _Paths.UNKNOWN in branches:
                return _Paths.UNKNOWN
            if branches == [_Paths.ASSIGNED, _Paths.ASSIGNED]:
                return _Paths.ASSIGNED
            continue
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and name not in _header_names(stmt):
            paths = _scan(_assigning_in(stmt, "body", name), name, values, facts)
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


class _Block:
    """A block of statements (a node's ``body``/``orelse``/``finalbody``), indexed once: where
    each statement stands and which statements bind each name. A read walks back only over
    the statements that bind its name, so reads of a long module cost what they find, not
    the statements between."""

    def __init__(self, statements: list[ast.stmt]) -> None:
        self.statements = statements
        self.position = {id(stmt): i for i, stmt in enumerate(statements)}
        self._binding: dict[str, list[int]] | None = None

    def assigning_before(self, end: int, name: str) -> Iterator[ast.stmt]:
        """The statements before position ``end`` that bind ``name``, latest first."""
        if self._binding is None:
            self._binding = {}
            for i, stmt in enumerate(self.statements):
                for bound in _assigned_names(stmt):
                    self._binding.setdefault(bound, []).append(i)
        positions = self._binding.get(name, ())
        for k in range(bisect_left(positions, end) - 1, -1, -1):
            yield self.statements[positions[k]]


def _blocks(owner: ast.AST) -> dict[str, _Block]:
    """The blocks of ``owner`` by field, indexed on first use (kept on the node)."""
    found = getattr(owner, "_xlalint_blocks", None)
    if found is None:
        found = {}
        for field in _BLOCKS:
            statements = getattr(owner, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                found[field] = _Block(statements)
        owner._xlalint_blocks = found  # type: ignore[attr-defined]
    return found


def _place_in_block(owner: ast.AST | None, stmt: ast.stmt) -> tuple[_Block, int] | None:
    """The block of ``owner`` that holds ``stmt``, and where it stands in it."""
    if owner is None:
        return None
    for block in _blocks(owner).values():
        position = block.position.get(id(stmt))
        if position is not None and block.statements[position] is stmt:
            return block, position
    return None


def _assigning_in(owner: ast.AST, field: str, name: str) -> Iterator[ast.stmt]:
    """The statements of ``owner``'s block ``field`` that bind ``name``, latest first."""
    block = _blocks(owner).get(field)
    return block.assigning_before(len(block.statements), name) if block is not None else iter(())


def _within(node: ast.AST, root: ast.AST) -> bool:
    return any(n is node for n in ast.walk(root))


# --- correlated branches -------------------------------------------------------------------

# What a node's enclosing tests say: condition key -> (the value the keyed expression has
# there, the ``if``/conditional expression that says so).
Facts = dict[str, tuple[bool, ast.If | ast.IfExp]]


def condition_key(test: ast.expr) -> tuple[str, bool]:
    """A key naming what a condition tests, and whether the ``if`` body runs when that
    is true: ``not x`` and ``x is None`` -> (x, False); ``x is not None`` -> (x, True).
    Kept on the node (it is the node's text, as ``ast.dump`` gives it): the order of a
    step's events asks it of each ``if`` on each path through it."""
    found = getattr(test, "_xlalint_condition_key", None)
    if found is None:
        found = _condition_key(test)
        test._xlalint_condition_key = found  # type: ignore[attr-defined]
    return found


def _condition_key(test: ast.expr) -> tuple[str, bool]:
    positive = True
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, positive = test.operand, not positive
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        if isinstance(test.ops[0], ast.Is):
            positive = not positive
        test = test.left
    return ast.dump(test), positive


def branch_facts(node: ast.AST) -> Facts:
    """The tests ``node`` runs under in its function (or module): for each enclosing
    ``if`` (or conditional expression) whose body or ``else`` holds it, whether the
    tested expression is true there. Tests that call something are left out (their
    answer may change from one call to the next)."""
    facts: Facts = {}
    child, owner = node, parent(node)
    while owner is not None and not isinstance(owner, (*DEFINITIONS, ast.Module)):
        if isinstance(owner, (ast.If, ast.IfExp)) and child is not owner.test:
            condition = _stable_condition(owner)
            if condition is not None:
                key, positive = condition
                in_body = any(child is s for s in owner.body) if isinstance(owner, ast.If) else child is owner.body
                facts.setdefault(key, (positive if in_body else not positive, owner))
        child, owner = owner, parent(owner)
    return facts


def decided_branch(stmt: ast.If, facts: Facts) -> bool | None:
    """Whether ``facts`` (of a later node of the same function) say which branch of the
    earlier ``stmt`` ran: True for its body, False for its ``else``, None when they do not
    (another test, or a name of the test assigned between the two)."""
    condition = _stable_condition(stmt) if facts else None
    if condition is None:
        return None
    key, positive = condition
    fact = facts.get(key)
    if fact is None:
        return None
    value, later = fact
    start, end = stmt.test.end_lineno or stmt.lineno, later.test.lineno
    if end < start:
        return None
    # A loop around the later test and not the earlier one runs the test again after
    # the rest of its body: a name set there changes the answer for the next pass.
    for owner in _ancestors_in_scope(later):
        if isinstance(owner, _LOOPS) and owner.lineno > start:
            end = max(end, owner.end_lineno or end)
    bound = _bound_lines(_scope_of(stmt))
    for node in ast.walk(stmt.test):
        if isinstance(node, ast.Name) and any(start <= line <= end for line in bound.get(node.id, ())):
            return None
    return value == positive


def opposite_branches(first: ast.AST, second: ast.AST) -> bool:
    """``first`` and ``second`` (in two functions: ``__init__`` wraps ``self.model`` under
    ``if args.use_fsdp:``, a method clips in the ``else`` of its own ``if args.use_fsdp:``)
    run under opposite answers of one test that asks the same thing in both places: a
    stable test whose names neither function binds (a module-level ``args``), so both
    read the value the program set once."""
    scopes = (_scope_of(first), _scope_of(second))
    if scopes[0] is scopes[1] or any(not isinstance(scope, FUNCTIONS) for scope in scopes):
        return False
    later = branch_facts(second)
    if not later:
        return False
    for key, (value, owner) in branch_facts(first).items():
        fact = later.get(key)
        if fact is None or fact[0] == value:
            continue
        names = {
            node.id for test in (owner.test, fact[1].test) for node in ast.walk(test) if isinstance(node, ast.Name)
        }
        if not any(name in _bound_lines(scope) for scope in scopes for name in names):
            return True
    return False


def _ancestors_in_scope(node: ast.AST) -> Iterator[ast.AST]:
    owner = parent(node)
    while owner is not None and not isinstance(owner, (*DEFINITIONS, ast.Module)):
        yield owner
        owner = parent(owner)


def _stable_condition(node: ast.If | ast.IfExp) -> tuple[str, bool] | None:
    """The condition key of a test with the same answer each time it runs while its
    names keep their values (it calls nothing); None for another test. Kept on the node:
    every read under it asks."""
    found = getattr(node, "_xlalint_stable_condition", False)
    if found is False:
        calls = (ast.Call, ast.Await, ast.NamedExpr, ast.Yield, ast.YieldFrom)
        found = None if any(isinstance(n, calls) for n in ast.walk(node.test)) else condition_key(node.test)
        node._xlalint_stable_condition = found  # type: ignore[union-attr]
    return found


def _bound_lines(scope: ast.AST) -> dict[str, list[int]]:
    """The lines where each name of ``scope`` is bound or changed (``args = ...``,
    ``args.use_fsdp = ...``, ``args[k] = ...``), found once per scope."""
    found = getattr(scope, "_xlalint_bound_lines", None)
    if found is None:
        found = {}
        for node in walk_scope(scope, shallow=True):
            if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(
                node.ctx, (ast.Store, ast.Del)
            ):
                root = node
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name):
                    found.setdefault(root.id, []).append(node.lineno)
        scope._xlalint_bound_lines = found  # type: ignore[attr-defined]
    return found


# --- call order ------------------------------------------------------------------------------


def runs_before(first: ast.AST, second: ast.AST, semantic: Semantic) -> bool | None:
    """Whether ``first`` runs before ``second``: compared where both are reached, in the
    nearest function (or the module) that runs both, directly or through calls of the
    module's functions (at most a few calls deep). None when no function of the module
    is seen to run both. A call that leads to ``second`` does not run before it."""
    reached_first = _reached_from(first, semantic)
    reached_second = _reached_from(second, semantic)
    common = [key for key in reached_first if key in reached_second]
    if not common:
        return None
    nearest = min(common, key=lambda key: (reached_first[key][1] + reached_second[key][1], reached_first[key][1]))
    return reached_first[nearest][0] < reached_second[nearest][0]


def _reached_from(node: ast.AST, semantic: Semantic) -> dict[int, tuple[tuple[int, int], int]]:
    """The scopes that run ``node``: id of the scope -> (where in it ``node``, or the
    earliest call leading to it, is; how many calls away)."""
    scope = _scope_of(node)
    reached = {id(scope): ((getattr(node, "lineno", 0), getattr(node, "col_offset", 0)), 0)}
    if isinstance(scope, FUNCTIONS):
        for key, (position, depth) in _callers(scope, semantic).items():
            reached.setdefault(key, (position, depth))
    return reached


def _callers(function: ast.AST, semantic: Semantic) -> dict[int, tuple[tuple[int, int], int]]:
    """The scopes that call ``function``, directly or through other functions of the
    module, up to ``_CALL_DEPTH`` calls away, each with its earliest such call; found once
    per function (a breadth-first walk up the calls)."""
    found = getattr(function, "_xlalint_callers", None)
    if found is not None:
        return found
    found = {}
    frontier = [function]
    seen = {id(function)}
    for depth in range(1, _CALL_DEPTH + 1):
        callers = []
        for callee in frontier:
            for call in call_sites(callee, semantic):  # type: ignore[arg-type]
                caller = _scope_of(call)
                position = (call.lineno, call.col_offset)
                known = found.get(id(caller))
                if known is None:
                    found[id(caller)] = (position, depth)
                    if isinstance(caller, FUNCTIONS) and id(caller) not in seen:
                        seen.add(id(caller))
                        callers.append(caller)
                elif known[1] == depth and position < known[0]:
                    found[id(caller)] = (position, depth)
        frontier = callers
        if not frontier:
            break
    function._xlalint_callers = found  # type: ignore[attr-defined]
    return found


def _scope_of(node: ast.AST) -> ast.AST:
    """The function whose body runs ``node``, or the module."""
    current = parent(node)
    while current is not None:
        if isinstance(current, FUNCTIONS):
            return current
        if parent(current) is None:
            return current
        current = parent(current)
    return node
