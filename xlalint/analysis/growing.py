"""Tensors that grow in a loop: ``X = torch.cat((X, ...))`` where ``X`` is carried from
one iteration to the next, and passed to a model in the same loop (autoregressive
generation: ``idx = torch.cat((idx, idx_next), dim=1)``).

A tensor the loop rebinds on every iteration before it concatenates onto it (a batch
from the loader, ``samples = torch.cat((samples, samples), 0)`` after ``samples`` is
taken from the loader) does not grow: every iteration starts again from the new value.

Two rules ask: XLA307 (one shape, so one compile, per iteration) and XLA308 (a crop
``idx[:, -block_size:]`` of the growing tensor is past its length while it is shorter).
The analysis is given the semantic layer and a test of "this expression is a model",
never the rule context; it indexes the module's concatenations once.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from xlalint.analysis.semantic import Semantic, ancestors, keyword, parent, subtree

CONCATENATE = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class Growth:
    """``name = torch.cat((name, ...), dim)`` in ``loop``, each iteration onto the last."""

    call: ast.Call
    name: str
    loop: ast.AST
    dim: int | None  # the dimension it grows along, when it is a literal


class GrowingTensors:
    """The growing tensors of one module."""

    def __init__(self, semantic: Semantic, is_model: Callable[[ast.AST], bool]):
        """``is_model``: the expression holds an ``nn.Module`` (a call of it runs the model)."""
        self.semantic = semantic
        self.is_model = is_model
        self._fed: dict[int, frozenset[str]] = {}

    @cached_property
    def growths(self) -> list[Growth]:
        """Every concatenation that grows a tensor the loop passes to a model."""
        found = []
        for call in self.semantic.calls_of("cat", "concat", "concatenate"):
            name = _grown_name(call)
            if name is None or self.semantic.call_name(call) not in CONCATENATE:
                continue
            loop = enclosing_loop(call)
            if loop is None or rebound_each_iteration(name, loop, call):
                continue
            if name in self.fed_to_a_model(loop):
                found.append(Growth(call, name, loop, _dim(call)))
        return found

    @cached_property
    def _by_loop(self) -> dict[int, list[Growth]]:
        by_loop: dict[int, list[Growth]] = {}
        for growth in self.growths:
            by_loop.setdefault(id(growth.loop), []).append(growth)
        return by_loop

    def growing_at(self, node: ast.AST, name: str) -> Growth | None:
        """The growth of ``name`` in a loop around ``node`` (within its function), if any."""
        for ancestor in ancestors(node):
            if isinstance(ancestor, _SCOPES):
                return None
            if isinstance(ancestor, LOOPS):
                for growth in self._by_loop.get(id(ancestor), ()):
                    if growth.name == name:
                        return growth
        return None

    def fed_to_a_model(self, loop: ast.AST) -> frozenset[str]:
        """The local names whose values reach a model call in ``loop``'s body: the
        arguments of the call, and the names that assignments in the loop compute them
        from (one pass backward over the body, then once more for what a later
        iteration carries)."""
        if id(loop) not in self._fed:
            self._fed[id(loop)] = self._names_fed(loop)
        return self._fed[id(loop)]

    def _names_fed(self, loop: ast.AST) -> frozenset[str]:
        body = [node for stmt in _bodies(loop) for node in subtree(stmt)]
        fed: set[str] = set()
        for node in body:
            if isinstance(node, ast.Call) and self._calls_a_model(node):
                for argument in [*node.args, *(kw.value for kw in node.keywords)]:
                    fed.update(names_in(argument))
        assignments = sorted((node for node in body if isinstance(node, ast.Assign)), key=lambda node: node.lineno)
        for _ in range(2):
            for assignment in reversed(assignments):
                if any(isinstance(target, ast.Name) and target.id in fed for target in assignment.targets):
                    fed.update(names_in(assignment.value))
        return frozenset(fed)

    def _calls_a_model(self, call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Name) and func.id == "self":
            return True
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        return self.is_model(func)


def rebound_each_iteration(name: str, loop: ast.AST, node: ast.AST) -> bool:
    """Every iteration of ``loop`` binds ``name`` afresh before ``node``: it is the loop's
    target (``for samples, labels in loader``), or a statement of the loop body that runs
    on every iteration, before the one holding ``node``, assigns it a value not computed
    from itself."""
    if isinstance(loop, (ast.For, ast.AsyncFor)) and name in _target_names(loop.target):
        return True
    holder = next((a for a in [node, *ancestors(node)] if parent(a) is loop), None)
    if holder is None or not any(holder is statement for statement in loop.body):  # type: ignore[attr-defined]
        return False
    for statement in loop.body:  # type: ignore[attr-defined]
        if statement is holder:
            return False
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and _binds_afresh(statement, name):
            return True
    return False


def _binds_afresh(statement: ast.Assign | ast.AnnAssign, name: str) -> bool:
    """``statement`` assigns ``name`` a value not computed from ``name``."""
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    if statement.value is None or not any(name in _target_names(target) for target in targets):
        return False
    return name not in names_in(statement.value)


def enclosing_loop(node: ast.AST) -> ast.AST | None:
    """The innermost loop around ``node`` within its function (None: not in a loop)."""
    for ancestor in ancestors(node):
        if isinstance(ancestor, LOOPS):
            return ancestor
        if isinstance(ancestor, _SCOPES):
            return None
    return None


def names_in(expr: ast.AST) -> set[str]:
    return {node.id for node in subtree(expr) if isinstance(node, ast.Name)}


def _target_names(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for element in target.elts for name in _target_names(element)}
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()


def _grown_name(call: ast.Call) -> str | None:
    """``X`` of ``X = torch.cat((X, ...))``: the call's result replaces a tensor it
    concatenates onto."""
    statement = next(ancestors(call), None)
    if not isinstance(statement, ast.Assign) or statement.value is not call or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    if not isinstance(target, ast.Name) or not call.args or not isinstance(call.args[0], (ast.Tuple, ast.List)):
        return None
    parts = call.args[0].elts
    return target.id if any(isinstance(part, ast.Name) and part.id == target.id for part in parts) else None


def _dim(call: ast.Call) -> int | None:
    """The literal ``dim`` of a concatenation (0 when none is given)."""
    given = call.args[1] if len(call.args) > 1 else getattr(keyword(call, "dim"), "value", None)
    if given is None:
        return 0
    return literal_int(given)


def literal_int(expr: ast.AST) -> int | None:
    """``3`` or ``-1``: the integer written, else None."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = literal_int(expr.operand)
        return -inner if inner is not None else None
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    return None


def _bodies(loop: ast.AST) -> list[ast.stmt]:
    statements = list(loop.body)  # type: ignore[attr-defined]
    if isinstance(loop, ast.While):
        statements.insert(0, ast.Expr(loop.test))
    return statements
