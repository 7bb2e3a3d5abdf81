"""The fix of XLA103: a sync on every path that ends an iteration of the loop."""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import parent
from xlalint.analysis.steps import StepLoop
from xlalint.engine.rule import Rule
from xlalint.model import AppendToBody, Fix, InsertStatement, MoveStatement, Operation

Loop = ast.For | ast.AsyncFor | ast.While

# Statements after which nothing in the block runs: a sync goes before them.
JUMPS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


def sync_fix(rule: Rule, loop: Loop, start: int, guarded: ast.Expr | None = None) -> Fix | None:
    """A sync at the end of ``loop``'s body and before every jump that leaves the
    iteration from the ``start``-th statement of the body on (an earlier jump skips an
    iteration whose work has not begun), so every path out of the iteration syncs.
    ``guarded``: the loop's only sync, under an every-N guard, moved to the end instead."""
    ctx = rule.ctx
    body = loop.body
    if body[0].lineno == loop.lineno and len(body) > 1:
        return None  # `for x in y: a; b` on one line: leave the layout to the user
    sync, imports = ctx.xla_api("sync", "mark_step", at=loop)
    code = f"{sync}()"
    operations: list[Operation] = []
    anchors: list[ast.stmt] = []
    for jump in loop_exits(loop, start):
        anchor = own_line_statement(jump)
        if anchor is None or anchor is loop:
            return None
        if anchor not in anchors:
            anchors.append(anchor)
            operations.append(InsertStatement(ctx.span(anchor), code, "before"))
    if guarded is not None and not isinstance(body[-1], JUMPS):
        # The user's own sync moves out of the guard: appending one would sync twice
        # on the steps that apply the gradients.
        operations.append(MoveStatement(ctx.span(guarded), ctx.span(body[-1]), "after"))
        moved = ctx.source_of(guarded.value)
        message = f"Move `{moved}` out of the every-N guard to the end of the loop body"
        if len(operations) == 1:
            return rule.fix("safe", message, *operations)
        message += f", and add `{code}` before each jump out of the step"
        return rule.fix("safe", message, *operations, imports=imports)
    if not isinstance(body[-1], JUMPS):
        operations.append(AppendToBody(ctx.header_span(loop), code))
    elif isinstance(body[-1], ast.Raise):
        operations.append(InsertStatement(ctx.span(body[-1]), code, "before"))
    where = "to the loop body" if len(operations) == 1 else "to the loop body and before each jump out of the step"
    return rule.fix("safe", f"Add `{code}` {where}", *operations, imports=imports)


def guarded_sync(loop: StepLoop) -> ast.Expr | None:
    """The step's only sync point when it is a statement of its own (``xm.mark_step()``
    on its line) under the every-N guard in the loop body, in a block that keeps other
    statements: moved to the end of the body it syncs every step, and once."""
    points = loop.sync_points()
    if len(points) != 1 or not isinstance(points[0], ast.Call):
        return None
    statement = parent(points[0])
    block_owner = parent(statement) if isinstance(statement, ast.Expr) else None
    if not isinstance(block_owner, ast.If) or loop.guard_of(points[0]) is None:
        return None
    block = block_owner.body if statement in block_owner.body else block_owner.orelse
    if len(block) < 2 or statement.lineno == block_owner.lineno:
        return None  # it would leave the block empty, or it shares the `if` line
    if any(other is not statement and statement.lineno in (other.lineno, other.end_lineno) for other in block):
        return None  # `a; xm.mark_step()`: not a line of its own
    node: ast.AST | None = block_owner
    while node is not None and node is not loop.node:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return None  # in a helper the loop calls
        node = parent(node)
    return statement if node is loop.node else None


def loop_exits(loop: Loop, start: int) -> list[ast.stmt]:
    """The ``break``/``continue`` of ``loop`` and the ``return`` statements in its body
    (not those of nested loops or functions), from the ``start``-th statement on."""
    exits: list[ast.stmt] = []
    for stmt in loop.body[start:]:
        stack: list[tuple[ast.AST, bool]] = [(stmt, False)]
        while stack:
            node, in_nested_loop = stack.pop()
            if isinstance(node, ast.Return) or (isinstance(node, (ast.Break, ast.Continue)) and not in_nested_loop):
                exits.append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            nested = in_nested_loop or isinstance(node, (ast.For, ast.AsyncFor, ast.While))
            stack.extend((child, nested) for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            if isinstance(node, ast.Try):
                stack.extend((h, nested) for h in node.handlers)
            elif isinstance(node, ast.Match):
                stack.extend((c, nested) for c in node.cases)
    return sorted(exits, key=lambda n: (n.lineno, n.col_offset))


def own_line_statement(stmt: ast.stmt) -> ast.stmt | None:
    """The statement a line of code can go before: ``stmt`` itself, or, when it shares its
    line with the header of the statement it is in (``if args.dry_run: break``), that
    statement (a sync before the ``if`` also runs before the ``break``). None for a jump
    on the line of an ``except``/``case`` header (nothing can go between them)."""
    current: ast.stmt = stmt
    while True:
        owner = parent(current)
        if owner is None or getattr(owner, "lineno", None) != current.lineno:
            return current
        if not isinstance(owner, ast.stmt):
            return None
        current = owner
