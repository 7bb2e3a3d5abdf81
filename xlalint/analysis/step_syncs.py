"""Values a sync of the step has already computed: a host read of one after the sync
runs no graph (XLA207 does not flag it).

``torch_xla.sync()`` (or ``xm.mark_step()``, ``xm.optimizer_step(opt, barrier=True)``,
the end of a ``with torch_xla.step():`` block) executes the pending graph, so every
tensor of the step then holds its data on the device. Reading one on the host
(``loss.item()``) afterwards copies that data: it compiles and runs nothing, and joins
no collective, until the value is computed again.

The sync must come before the read on every path through the iteration: a statement
in a block around the read (up to the step loop's body, or the body of the helper the
read is in), before it, not in a branch. Between the sync and the read nothing may
compute the value again: no assignment to its name (or to the object it is an
attribute of), no in-place method on it (``loss.div_(n)``), no call that is handed it
(``xm.all_reduce("sum", [loss])`` reduces in place), and no loop around the read below
the sync (a later iteration reads what the loop recomputed).

Each block is indexed once (which statement syncs, which names each statement
changes), so a question costs the depth of the read, not the length of the step.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Callable, Iterator

from xlalint.analysis.semantic import ancestors, child_nodes, dotted_name, enclosing_statement
from xlalint.analysis.values import FUNCTIONS

# Calls that read their arguments and change nothing on the device.
_READING_CALLS = frozenset({"print", "str", "repr", "format", "float", "int", "bool", "len", "isinstance", "type"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_BLOCK_FIELDS = ("body", "orelse")
# Where the walk up from a read ends: a loop's iteration, a function's call, the module.
_SCOPES = (*_LOOPS, *FUNCTIONS, ast.ClassDef, ast.Module)


class _Block:
    """One statement list: where its syncs are, and where each name changes."""

    def __init__(self, statements: list[ast.stmt], syncs: Callable[[ast.stmt], bool]):
        self.position = {id(stmt): i for i, stmt in enumerate(statements)}
        self.statements = statements
        # last_sync[i]: index of the last statement before i that syncs, else -1.
        self.last_sync: list[int] = []
        last = -1
        self.changes: dict[str, list[int]] = {}
        for i, stmt in enumerate(statements):
            self.last_sync.append(last)
            if syncs(stmt):
                last = i
            for name in changed_names(stmt):
                self.changes.setdefault(name, []).append(i)

    def changed_between(self, names: tuple[str, ...], start: int, end: int) -> bool:
        """A statement at an index in [start, end) changes one of ``names``."""
        for name in names:
            positions = self.changes.get(name, ())
            i = bisect.bisect_left(positions, start)
            if i < len(positions) and positions[i] < end:
                return True
        return False


class SyncedValues:
    """Asks, for a host read in a step, which sync already computed what it reads."""

    def __init__(self, is_sync_call: Callable[[ast.Call], bool], is_step_context: Callable[[ast.withitem], bool]):
        self._is_sync_call = is_sync_call
        self._is_step_context = is_step_context
        self._blocks: dict[tuple[int, str], _Block] = {}

    def sync_before(self, read: ast.AST, value: ast.expr) -> ast.stmt | None:
        """The statement that syncs after ``value`` (a name or ``a.b``) was computed and
        before ``read`` runs, on every path of one iteration of the loop or function
        around the read, with nothing in between that computes ``value`` again; None
        when there is none."""
        name = dotted_name(value)
        stmt = enclosing_statement(read)
        if name is None or stmt is None:
            return None
        names = _prefixes(name)
        child: ast.AST = stmt
        for owner in ancestors(stmt):
            field = next((f for f in _BLOCK_FIELDS if child in getattr(owner, f, ())), None)
            if field is None or (isinstance(owner, ast.Try) and field != "body"):
                return None  # a handler, a `finally`, a `match` case: what ran before is not known
            if field == "orelse" and isinstance(owner, (*_LOOPS, ast.Try)):
                return None
            block = self._block(owner, field)
            index = block.position[id(child)]
            synced = block.last_sync[index]
            if synced >= 0:
                return None if block.changed_between(names, synced + 1, index) else block.statements[synced]
            if block.changed_between(names, 0, index) or isinstance(owner, _SCOPES):
                return None  # changed, or no sync before it in this iteration or call
            child = owner
        return None

    def _block(self, owner: ast.AST, field: str) -> _Block:
        key = (id(owner), field)
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = _Block(getattr(owner, field), self._syncs)
        return block

    def _syncs(self, stmt: ast.stmt) -> bool:
        """``stmt`` syncs whenever it runs to its end: a simple statement that calls a
        sync, or a ``with torch_xla.step():`` block."""
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return any(self._is_step_context(item) for item in stmt.items)
        if isinstance(stmt, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign)):
            return any(isinstance(node, ast.Call) and self._is_sync_call(node) for node in _evaluated(stmt))
        return False


def changed_names(stmt: ast.stmt) -> set[str]:
    """The dotted names ``stmt`` may compute again (see the module docstring): targets it
    assigns or deletes, receivers of in-place methods, arguments of calls other than
    ``print``/``str``/``float``/... (nested definitions not included)."""
    changed: set[str] = set()
    for node in _evaluated(stmt, nested_blocks=True):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if name := dotted_name(node):
                changed.add(name)
        elif isinstance(node, ast.Call):
            func = node.func
            in_place = isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.startswith("_")
            if in_place and (name := dotted_name(func.value)):  # type: ignore[attr-defined]
                changed.add(name)
            if isinstance(func, ast.Name) and func.id in _READING_CALLS:
                continue
            for argument in (*node.args, *(k.value for k in node.keywords)):
                for part in _handed(argument):
                    if name := dotted_name(part):
                        changed.add(name)
    return changed


def _handed(argument: ast.expr) -> Iterator[ast.expr]:
    """What an argument hands the callee: itself, or the items of a list/tuple of them."""
    if isinstance(argument, ast.Starred):
        argument = argument.value
    if isinstance(argument, (ast.List, ast.Tuple, ast.Set)):
        for element in argument.elts:
            yield from _handed(element)
    else:
        yield argument


def _prefixes(name: str) -> tuple[str, ...]:
    """``a.b.c`` changes when ``a``, ``a.b`` or ``a.b.c`` is assigned."""
    parts = name.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


def _evaluated(stmt: ast.stmt, nested_blocks: bool = False) -> Iterator[ast.AST]:
    """The nodes ``stmt`` runs (with ``nested_blocks``, also those of its inner blocks):
    not nested functions, classes and lambdas."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        for child in child_nodes(node):
            if isinstance(child, (*FUNCTIONS, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(child, ast.stmt) and not nested_blocks:
                continue
            stack.append(child)
