"""Where an optimizer is built, and the fixes that build it elsewhere: after the move of
its model to the XLA device (XLA501), or after torch_xla's FSDP wrap, from the wrapped
model (XLA501 when the move comes after the optimizer too, XLA209 when only the wrap
does: one fix, written here once).

An optimizer holds the parameter objects of the moment its parameters are taken
(``model.parameters()``, parameter groups, ``list(model.parameters())``): every
statement that takes them must end up on the right side of the move or the wrap, and a
statement moves only within its block, across statements that do not read what it
binds (the optimizer: a scheduler built from it) and bind nothing it reads.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from xlalint.analysis.parallelism import Wrap
from xlalint.analysis.semantic import dotted_name, enclosing_function, enclosing_statement, method_name, parent
from xlalint.analysis.training_objects import Optimizer, TrainingObjects, same_object_tree
from xlalint.model import Applicability, Fix, MoveStatement, Span

# Statements with blocks: one of them never moves (nor is it the anchor of a move).
COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef, ast.ClassDef)
BUILD_AFTER_WRAP = "build the optimizer after the FSDP wrap, from the wrapped model"


def build_after_wrap(
    objects: TrainingObjects, optimizer: Optimizer, model: str, wrap: Wrap, span_of: Callable[[ast.AST], Span]
) -> Fix | None:
    """Build the optimizer (and take the parameters it is given) right after the FSDP
    wrap, from the wrapped model: only when the wrap rebinds the model's own name, in
    the optimizer's block, and nothing between them uses the optimizer (or binds what
    it reads). Safe when the statements moved only assign; unsafe when they choose
    parameters by name (FSDP's flattened parameters have other names). None otherwise."""
    wrap_statement = enclosing_statement(wrap.call)
    if (
        wrap_statement is None
        or wrap.target is None
        or optimizer.name is None
        or isinstance(wrap_statement, COMPOUND)
        or isinstance(optimizer.statement, COMPOUND)
        or any(held != wrap.target for held in optimizer.models)
    ):
        return None
    found = taking_statements(objects, optimizer, model, wrap_statement)
    if found is None:
        return None
    takers, between = found
    # The moves of the model in between (`model = model.to(dev)`) rebind its name to the
    # same module: the parameters taken after the wrap are still this model's.
    moves = {id(m.statement) for m in objects.moves_of(model, enclosing_function(wrap.call))}
    # FSDP flattens the parameters into new ones with new names: groups chosen by name
    # (`"bias" not in n`) select something else after the wrap.
    by_name = any(
        isinstance(node, ast.Call) and method_name(node) == "named_parameters"
        for statement in takers
        for node in ast.walk(statement)
    )
    return move_down(
        takers,
        [statement for statement in between if id(statement) not in moves],
        wrap_statement,
        BUILD_AFTER_WRAP,
        span_of,
        also_between=[statement for statement in between if id(statement) in moves],
        unsafe=by_name,
    )


def taking_statements(
    objects: TrainingObjects, optimizer: Optimizer, model: str, anchor: ast.stmt
) -> tuple[list[ast.stmt], list[ast.stmt]] | None:
    """The statements of the anchor's block, before it, that take ``model``'s
    parameters (the optimizer's, and any other ``.parameters()`` read: each holds the
    parameter objects of that moment), and the other statements from the first of them
    to the anchor. None when one of them is not in the anchor's block (in another
    block, or inside the anchor)."""
    block = block_of(optimizer.statement, anchor)
    if block is None:
        return None
    owner = parent(anchor)
    index = {id(statement): i for i, statement in enumerate(block)}
    end = index[id(anchor)]
    scope = enclosing_function(optimizer.statement)
    taking = [optimizer.statement, *optimizer.taken]
    for call in objects.parameter_reads(model, scope):
        if position(call) >= position(anchor):
            break
        statement = enclosing_statement(call)
        if statement is not None:
            taking.append(statement)
    positions: set[int] = set()
    for statement in taking:
        top = top_statement(statement, owner)
        at = index.get(id(top)) if top is not None else None
        if at is None or at == end:
            return None
        if at < end:
            positions.add(at)
    if not positions:
        return None
    first = min(positions)
    takers = [block[i] for i in sorted(positions)]
    between = [block[i] for i in range(first, end) if i not in positions]
    return takers, between


def move_down(
    takers: list[ast.stmt],
    between: list[ast.stmt],
    anchor: ast.stmt,
    message: str,
    span_of: Callable[[ast.AST], Span],
    also_between: tuple[ast.stmt, ...] | list[ast.stmt] = (),
    unsafe: bool = False,
) -> Fix | None:
    """Move ``takers`` (in their order) right after ``anchor``, when nothing in between
    (``between`` and ``also_between``) reads what they assign and they read nothing
    ``between`` assigns. Unsafe when one of them does more than assign (its effects
    then come later), or when the caller says so."""
    bound_by_takers = paths_bound(takers)
    if reads_any([*between, *also_between, anchor], bound_by_takers):
        return None
    if reads_any(takers, paths_bound(between)):
        return None
    assigns_only = all(isinstance(statement, (ast.Assign, ast.AnnAssign)) for statement in takers)
    applicability: Applicability = "safe" if assigns_only and not unsafe else "unsafe"
    operations = tuple(MoveStatement(span_of(statement), span_of(anchor), "after") for statement in takers)
    return Fix(applicability, message, operations)


def position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def top_statement(statement: ast.stmt, owner: ast.AST | None) -> ast.stmt | None:
    """The statement of ``owner``'s blocks that is or holds ``statement``."""
    node: ast.AST | None = statement
    while node is not None and parent(node) is not owner:
        node = parent(node)
    return node if isinstance(node, ast.stmt) else None


def block_of(first: ast.stmt, second: ast.stmt) -> list[ast.stmt] | None:
    """The statement list holding both, if they are in one."""
    owner = parent(first)
    if owner is None or owner is not parent(second):
        return None
    for field in ("body", "orelse", "finalbody"):
        block = getattr(owner, field, None)
        if isinstance(block, list) and first in block and second in block:
            return block
    return None


def reads_any(statements: list[ast.stmt], names: set[str]) -> bool:
    """The statements read one of ``names``, a part of one, or what one is part of."""
    return any(same_object_tree(read, name) for read in paths_read(statements) for name in names)


def paths_read(statements: list[ast.stmt]) -> set[str]:
    """The names and attribute paths the statements read (``self.device``, ``model``)."""
    found: set[str] = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                name = dotted_name(node)
                if name:
                    found.add(name)
    return found


def paths_bound(statements: list[ast.stmt]) -> set[str]:
    """The names and attribute paths the statements assign, define or import."""
    bound: set[str] = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                name = dotted_name(node)
                if name:
                    bound.add(name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
    return bound
