"""What a call's ``**kwargs`` may pass: the keys of a dict the file builds.

The official examples build a loader's options as a dict and unpack it:
``kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}``, then
``DataLoader(dataset, **kwargs)``; or ``train_kwargs = {"batch_size": 64}`` followed by
``train_kwargs.update(cuda_kwargs)``. A rule that asks whether a keyword is given needs
every key such a dict can hold, on any branch.

Resolved: dict displays with constant string keys, ``dict(k=v, ...)``, a conditional
between those, a name bound to them in its scope, and that name's ``.update(...)`` and
``name["key"] = value``. Anything else a name meets (passed to a function, another
method, a key that is not a constant) makes the answer unknown: ``None``, never a guess.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from xlalint.analysis.semantic import parent
from xlalint.analysis.values import assigned_values, enclosing_scopes, walk_scope

# Reading a dict does not change its keys.
_READING_METHODS = frozenset({"get", "items", "keys", "values", "copy", "__getitem__"})
_MAX_DEPTH = 6

# key -> the values it may be given (several on different branches).
Keys = dict[str, list[ast.expr]]


def unpacked_keywords(call: ast.Call) -> Keys | None:
    """The keywords the ``**`` arguments of ``call`` may pass, with their possible
    values; None when one cannot be resolved."""
    found: Keys = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            keys = dict_keys(keyword.value)
            if keys is None:
                return None
            _merge(found, keys)
    return found


def dict_keys(expr: ast.expr, depth: int = 0, seen: frozenset[int] = frozenset()) -> Keys | None:
    """Every key the dict ``expr`` evaluates to may hold, on any branch."""
    if depth > _MAX_DEPTH or id(expr) in seen:
        return None
    seen = seen | {id(expr)}
    if isinstance(expr, ast.Dict):
        found: Keys = {}
        for key, value in zip(expr.keys, expr.values):
            if key is None:  # `{**other}`
                nested = dict_keys(value, depth + 1, seen)
                if nested is None:
                    return None
                _merge(found, nested)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.setdefault(key.value, []).append(value)
            else:
                return None
        return found
    if isinstance(expr, ast.IfExp):
        body, orelse = dict_keys(expr.body, depth + 1, seen), dict_keys(expr.orelse, depth + 1, seen)
        if body is None or orelse is None:
            return None
        _merge(body, orelse)
        return body
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
        return _call_keys(expr, depth, seen)
    if isinstance(expr, ast.Name):
        return _name_keys(expr, depth, seen)
    return None


def _call_keys(call: ast.Call, depth: int, seen: frozenset[int]) -> Keys | None:
    """``dict(mapping, k=v)`` or ``name.update(mapping, k=v)``."""
    if len(call.args) > 1:
        return None
    found: Keys = {}
    if call.args:
        positional = dict_keys(call.args[0], depth + 1, seen)
        if positional is None:
            return None
        _merge(found, positional)
    for keyword in call.keywords:
        if keyword.arg is None:
            nested = dict_keys(keyword.value, depth + 1, seen)
            if nested is None:
                return None
            _merge(found, nested)
        else:
            found.setdefault(keyword.arg, []).append(keyword.value)
    return found


def _name_keys(name: ast.Name, depth: int, seen: frozenset[int]) -> Keys | None:
    """The keys of the dicts bound to ``name`` in the innermost scope that binds it, with
    what its uses there add; None if a use may change it in another way."""
    for scope in enclosing_scopes(name):
        values = list(assigned_values(scope, lambda t, n=name.id: isinstance(t, ast.Name) and t.id == n, shallow=True))
        if not values:
            continue
        found: Keys = {}
        for value in values:
            keys = dict_keys(value, depth + 1, seen)
            if keys is None:
                return None
            _merge(found, keys)
        for use in _uses(scope, name.id):
            added = _added_by(use, depth, seen)
            if added is None:
                return None
            _merge(found, added)
        return found
    return None


def _uses(scope: ast.AST, name: str) -> Iterator[ast.Name]:
    for node in walk_scope(scope):
        if isinstance(node, ast.Name) and node.id == name:
            yield node


def _added_by(use: ast.Name, depth: int, seen: frozenset[int]) -> Keys | None:
    """The keys one use of the dict's name may add: none for ``**name`` (in a call or a
    dict display) and for reads, those of ``name.update(...)`` and ``name["key"] = v``; None for anything else."""
    owner = parent(use)
    if isinstance(use.ctx, ast.Store):
        # `name = {...}`: a value already read; any other binding (`name |= more`, a
        # `for` target...) is not followed.
        plain = (isinstance(owner, ast.Assign) and use in owner.targets) or isinstance(owner, ast.AnnAssign)
        return {} if plain else None
    if isinstance(owner, ast.keyword) and owner.arg is None:
        return {}
    if isinstance(owner, ast.Dict) and any(k is None and v is use for k, v in zip(owner.keys, owner.values)):
        return {}  # `{**name, ...}` copies it
    if isinstance(owner, ast.Attribute) and owner.value is use:
        call = parent(owner)
        if not (isinstance(call, ast.Call) and call.func is owner):
            return None
        if owner.attr in _READING_METHODS:
            return {}
        if owner.attr == "update":
            return _call_keys(call, depth, seen)
        return None
    if isinstance(owner, ast.Subscript) and owner.value is use:
        key = owner.slice
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        if isinstance(owner.ctx, ast.Load):
            return {}
        statement = parent(owner)
        if isinstance(owner.ctx, ast.Store) and isinstance(statement, ast.Assign) and owner in statement.targets:
            return {key.value: [statement.value]}
        return None
    return None


def _merge(into: Keys, more: Keys) -> None:
    for key, values in more.items():
        into.setdefault(key, []).extend(values)
