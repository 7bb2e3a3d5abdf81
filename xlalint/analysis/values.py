"""What a name can hold here: the values assigned to a name or ``self.<attr>`` in a scope,
the scopes around a node, a function's parameters and its call sites in the module.

The questions every analysis and rule asks of a variable, answered flow-insensitively
within one file (a name holds any value assigned to it anywhere in its scope).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from xlalint.analysis.semantic import Semantic, child_nodes, dotted_name, parent

Function = ast.FunctionDef | ast.AsyncFunctionDef
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Nodes whose bodies do not run where they stand.
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def is_self_attr(target: ast.AST, attr: str) -> bool:
    return (
        isinstance(target, ast.Attribute)
        and target.attr == attr
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    )


def assigned_values(scope: ast.AST, matches, shallow: bool = False) -> Iterator[ast.expr]:
    """Values assigned to targets that ``matches`` in ``scope`` (``a = v``, ``a: T = v``,
    ``a, b = v1, v2``, ``with v as a``). ``shallow``: not inside nested functions."""
    for node in _binding_statements(scope, shallow):
        yield from _values_of_binding(node, matches)


def assigned_values_by_name(scope: ast.AST, shallow: bool = False) -> dict[str, list[ast.expr]]:
    """What ``assigned_values`` gives for each plain name of ``scope``, all in one pass
    (for a question asked of many names)."""
    found: dict[str, list[ast.expr]] = {}
    for node in _binding_statements(scope, shallow):
        for name, value in _name_values(node):
            found.setdefault(name, []).append(value)
    return found


class ScopeValues:
    """``assigned_values_by_name(scope, shallow=True).get(name, [])`` for a question about
    one name of many scopes (in no promised order): found from the ``Name`` nodes of that
    spelling (``Semantic.names_with_id``), grouped by scope once per spelling, not by a
    walk of each scope (a module of many functions asked about each one's ``device``)."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        self._by_name: dict[str, dict[int, list[ast.AST]]] = {}

    def of(self, scope: ast.AST, name: str) -> list[ast.expr]:
        by_scope = self._by_name.get(name)
        if by_scope is None:
            by_scope = self._by_name[name] = {}
            for node in self.semantic.names_with_id(name):
                binding = _binding_of(node) if isinstance(node.ctx, ast.Store) else None
                if binding is not None:
                    found = by_scope.setdefault(id(shallow_scope(binding)), [])
                    if binding not in found:  # `a, a = 1, 2`: one statement
                        found.append(binding)
        return [value for node in by_scope.get(id(scope), ()) for n, value in _name_values(node) if n == name]


# What lies between a bound name and its binding statement (``_BINDINGS``).
_TARGET_PARTS = (ast.Tuple, ast.List, ast.Starred, ast.withitem)


def _binding_of(name: ast.Name) -> ast.AST | None:
    """The assignment or ``with`` whose target holds ``name``, else None."""
    node = parent(name)
    while isinstance(node, _TARGET_PARTS):
        node = parent(node)
    return node if isinstance(node, _BINDINGS) else None


def shallow_scope(node: ast.AST) -> ast.AST | None:
    """The scope whose ``walk_scope(..., shallow=True)`` reaches ``node``: the nearest
    definition (or lambda) around it, else the module (None for the module itself)."""
    current = parent(node)
    while current is not None and not isinstance(current, (*DEFINITIONS, ast.Module)):
        current = parent(current)
    return current


def _name_values(node: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """Each plain name ``node`` binds, with its value as ``assigned_values`` pairs them."""
    matched: list[str] = []  # the name matched last: `_match_targets` yields its value next

    def is_name(target: ast.AST) -> bool:
        if isinstance(target, ast.Name):
            matched.append(target.id)
            return True
        return False

    for value in _values_of_binding(node, is_name):
        yield matched.pop(), value


def _values_of_binding(node: ast.AST, matches) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _match_targets(target, node.value, matches)
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        yield from _match_targets(node.target, node.value, matches)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if item.optional_vars is not None:
                yield from _match_targets(item.optional_vars, item.context_expr, matches)


_BINDINGS = (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.With, ast.AsyncWith)


def _binding_statements(scope: ast.AST, shallow: bool) -> list[ast.AST]:
    """The assignments and ``with`` statements in ``scope``, found once per scope (the
    list is kept on the scope node: names are looked up many times per module)."""
    key = "_xlalint_bindings_shallow" if shallow else "_xlalint_bindings"
    found = getattr(scope, key, None)
    if found is None:
        found = [node for node in walk_scope(scope, shallow=shallow) if isinstance(node, _BINDINGS)]
        setattr(scope, key, found)
    return found


def _match_targets(target: ast.AST, value: ast.expr, matches) -> Iterator[ast.expr]:
    if matches(target):
        yield value
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        for t, v in zip(target.elts, value.elts):
            yield from _match_targets(t, v, matches)


def unpacked_items(scope: ast.AST, name: str, shallow: bool = False) -> Iterator[tuple[ast.expr, int]]:
    """``(value, index)`` for each ``a, name = value`` in ``scope`` whose value is not a
    tuple or list written out (``train_loader, val_loader = make_loaders()``): ``name``
    holds item ``index`` of what ``value`` gives. Not under a starred target."""
    for node in _binding_statements(scope, shallow):
        if not isinstance(node, ast.Assign) or isinstance(node.value, (ast.Tuple, ast.List)):
            continue
        for target in node.targets:
            if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(t, ast.Starred) for t in target.elts):
                for index, item in enumerate(target.elts):
                    if isinstance(item, ast.Name) and item.id == name:
                        yield node.value, index


def walk_scope(scope: ast.AST, shallow: bool = False) -> Iterator[ast.AST]:
    """The nodes of ``scope``; ``shallow`` skips nested function and class bodies."""
    stack = child_nodes(scope)
    while stack:
        node = stack.pop()
        yield node
        if shallow and isinstance(node, DEFINITIONS):
            continue
        stack.extend(child_nodes(node))


def enclosing_scopes(node: ast.AST) -> Iterator[ast.AST]:
    """The function scopes around ``node``, innermost first, then the module."""
    for anc in self_and_ancestors(parent(node)):
        if isinstance(anc, (*FUNCTIONS, ast.Module)):
            yield anc


def parameter_names(func: Function | ast.Lambda) -> set[str]:
    a = func.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    names.update(p.arg for p in (a.vararg, a.kwarg) if p is not None)
    return names


def call_sites(func: Function, semantic: Semantic, constructions: bool = False) -> Iterator[ast.Call]:
    """The calls of ``func`` in the module: ``func(...)``, or for a method
    ``<x>.func(...)`` within its class. ``constructions``: for the ``__init__`` of a
    module-level class, also the ``Cls(...)`` calls that run it (``Trainer(model, loader)``
    fills ``__init__``'s parameters after ``self``)."""
    cls = enclosing(func, ast.ClassDef)
    if cls is not None and parent(func) is cls:
        yield from semantic.method_calls(cls, func.name)  # type: ignore[arg-type]
        if constructions and func.name == "__init__" and isinstance(parent(cls), ast.Module):
            name = cls.name  # type: ignore[attr-defined]
            yield from (call for call in semantic.calls_named(name) if isinstance(call.func, ast.Name))
    else:
        yield from (call for call in semantic.calls_named(func.name) if isinstance(call.func, ast.Name))


def self_and_ancestors(node: ast.AST | None) -> Iterator[ast.AST]:
    while node is not None:
        yield node
        node = parent(node)


def enclosing(node: ast.AST, kind) -> ast.AST | None:
    for anc in self_and_ancestors(parent(node)):
        if isinstance(anc, kind):
            return anc
    return None


def passed_argument(call: ast.Call, func: Function, param: str) -> ast.expr | None:
    """What ``call`` (a call of ``func``) passes for parameter ``param``: by keyword, or
    by position (``self``/``cls`` of a method skipped); None when it cannot tell."""
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    positional = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if positional and positional[0] in ("self", "cls") and enclosing(func, ast.ClassDef) is not None:
        positional = positional[1:]
    if param not in positional:
        return None
    index = positional.index(param)
    if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return call.args[index]
    return None


def bound_arguments(func: Function, semantic: Semantic) -> dict[str, list[ast.expr | None]]:
    """What each parameter of ``func`` is bound to at the calls of it in the module
    (``call_sites``; an ``__init__``'s at the constructions of its class), one entry per call: the argument passed by position or keyword,
    the parameter's default where the call leaves it out (the default is a child of
    ``func.args``: it is evaluated where ``func`` is defined), None where the call
    cannot tell (after a ``*args``, with a ``**kwargs``, for ``*``/``**`` parameters).
    Built in one pass over the calls, once per function; a parameter no call binds
    (a library entry point) has an empty list."""
    found = getattr(func, "_xlalint_bound_arguments", None)
    if found is not None:
        return found
    a = func.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    if positional and positional[0] in ("self", "cls") and enclosing(func, ast.ClassDef) is not None:
        positional = positional[1:]
    keyword_only = [p.arg for p in a.kwonlyargs]
    defaults: dict[str, ast.expr | None] = dict(zip(positional[len(positional) - len(a.defaults) :], a.defaults))
    defaults.update((p, d) for p, d in zip(keyword_only, a.kw_defaults) if d is not None)
    found = {name: [] for name in (*positional, *keyword_only)}
    found.update((p.arg, []) for p in (a.vararg, a.kwarg) if p is not None)
    for call in call_sites(func, semantic, constructions=True):
        passed: dict[str, ast.expr | None] = {}
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                passed.update((name, None) for name in positional[index:])
                break
            if index < len(positional):
                passed[positional[index]] = arg
        for kw in call.keywords:
            if kw.arg is None:
                passed.update((name, None) for name in found if name not in passed)
            elif kw.arg in found:
                passed[kw.arg] = kw.value
        for name, values in found.items():
            values.append(passed[name] if name in passed else defaults.get(name))
    func._xlalint_bound_arguments = found  # type: ignore[union-attr]
    return found


def target_names(target: ast.AST) -> set[str]:
    """The dotted names an assignment target binds (``a``, ``self.x``; each of
    ``a, (b, *c)``)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(target_names(t) for t in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    dotted = dotted_name(target)
    return {dotted} if dotted else set()
