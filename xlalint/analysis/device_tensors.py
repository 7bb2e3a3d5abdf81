"""Which expressions hold a tensor on the accelerator (the XLA device once ported).

A tensor is on the device when it was moved there (``.to(device)``, ``.cuda()``), made
there (a factory with ``device=``), returned by a same-module function that returns
one, or read from a name every assignment of which in its scope is one; a parameter is
one when every call of its function in the module passes one. ``"cpu"`` is not a device
here, nor is a dtype (``.to(torch.float32)``). Conservative: what it cannot tell is not
on the device, so that a rule asking it stays quiet.
"""

from __future__ import annotations

import ast
from functools import cached_property

from xlalint.analysis.devices import DeviceAnalysis
from xlalint.analysis.semantic import Semantic, dotted_name, method_name, string_value, subtree
from xlalint.analysis.syntax import argument
from xlalint.analysis.values import (
    FUNCTIONS,
    Function,
    call_sites,
    enclosing,
    parameter_names,
    passed_argument,
    target_names,
    walk_scope,
)

# How far a value is followed through names, parameters and returns.
MAX_DEPTH = 4
_DEVICE_WORDS = ("device", "dev")


class DeviceTensors:
    def __init__(self, semantic: Semantic, devices: DeviceAnalysis):
        self.semantic = semantic
        self.devices = devices
        self._names: dict[tuple[int, str], bool] = {}
        self._returns: dict[int, bool] = {}
        self._scope_values: dict[int, dict[str, list[ast.expr | None]]] = {}

    def is_device_tensor(self, expr: ast.AST | None, depth: int = 0) -> bool:
        if expr is None or depth > MAX_DEPTH:
            return False
        if isinstance(expr, ast.Subscript):
            return self.is_device_tensor(expr.value, depth + 1)
        if isinstance(expr, ast.Name):
            return self._name_is_device_tensor(expr, depth)
        if not isinstance(expr, ast.Call):
            return False
        method = method_name(expr)
        if method == "cuda":
            return True
        if method == "to":
            return self.is_device(argument(expr, 0, "device"))
        if method is not None and method in _SAME_DEVICE_METHODS:
            return self.is_device_tensor(expr.func.value, depth + 1)  # type: ignore[attr-defined]
        device = next((kw.value for kw in expr.keywords if kw.arg == "device"), None)
        if device is not None and (self.semantic.call_name(expr) or "").startswith("torch."):
            return self.is_device(device)
        function = self._same_module_function(expr)
        return function is not None and self._returns_device_tensor(function, depth)

    def is_device(self, node: ast.AST | None) -> bool:
        """A device other than the CPU: a device value, or a name that says it holds one
        (``device``, ``args.device``, ``self.dev``)."""
        if node is None:
            return False
        text = string_value(node)
        if text is not None:
            return text.startswith(("cuda", "xla"))
        if isinstance(node, (ast.Name, ast.Attribute)):
            last = (dotted_name(node) or "").rsplit(".", 1)[-1].lower()
            return any(word in last for word in _DEVICE_WORDS) and "cpu" not in last
        if isinstance(node, ast.Call) and string_value(argument(node, 0, "type")) == "cpu":
            return False  # torch.device("cpu")
        return self.devices.is_any_device(node)

    # -- following names, parameters and returns -----------------------------------------
    def _name_is_device_tensor(self, name: ast.Name, depth: int) -> bool:
        scope = self.devices.scope_of(name)
        key = (id(scope), name.id)
        if key in self._names:
            return self._names[key]
        self._names[key] = False  # a cycle (x = f(x)) answers "not known"
        values = self._values_by_name(scope).get(name.id)
        if values:
            answer = all(value is not None and self.is_device_tensor(value, depth + 1) for value in values)
        else:
            answer = (
                isinstance(scope, FUNCTIONS)
                and name.id in parameter_names(scope)
                and self._parameter_is_device_tensor(scope, name.id, depth)
            )
        self._names[key] = answer
        return answer

    def _values_by_name(self, scope: ast.AST) -> dict[str, list[ast.expr | None]]:
        """What each name of ``scope`` is assigned in it (not in nested functions), once
        per scope; None for a value it cannot pair with the name (``a, b = f()``, a
        ``for`` target, ``+=``)."""
        key = id(scope)
        if key not in self._scope_values:
            found: dict[str, list[ast.expr | None]] = {}
            for node in walk_scope(scope, shallow=True):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        _pair(target, node.value, found)
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    _pair(node.target, node.value, found)
                elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
                    for name in target_names(node.target):
                        found.setdefault(name, []).append(None)
            self._scope_values[key] = found
        return self._scope_values[key]

    def _parameter_is_device_tensor(self, function: Function, parameter: str, depth: int) -> bool:
        passed = [passed_argument(call, function, parameter) for call in call_sites(function, self.semantic)]
        return bool(passed) and all(self.is_device_tensor(value, depth + 1) for value in passed)

    def _returns_device_tensor(self, function: Function, depth: int) -> bool:
        key = id(function)
        if key not in self._returns:
            self._returns[key] = False
            returns = [
                node.value
                for node in subtree(function)
                if isinstance(node, ast.Return) and node.value is not None and enclosing(node, FUNCTIONS) is function
            ]
            self._returns[key] = bool(returns) and all(self.is_device_tensor(value, depth + 1) for value in returns)
        return self._returns[key]

    def _same_module_function(self, call: ast.Call) -> Function | None:
        if not isinstance(call.func, ast.Name):
            return None
        functions = self._functions_by_name.get(call.func.id, [])
        return functions[0] if len(functions) == 1 else None

    @cached_property
    def _functions_by_name(self) -> dict[str, list[Function]]:
        """The functions of the module that are not methods, by name."""
        found: dict[str, list[Function]] = {}
        for node in self.semantic.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):
            if enclosing(node, ast.ClassDef) is None:
                found.setdefault(node.name, []).append(node)
        return found


# Tensor methods whose result lives where their receiver does.
_SAME_DEVICE_METHODS = frozenset(
    {"view", "reshape", "t", "contiguous", "narrow", "float", "long", "int", "half", "bfloat16", "detach", "clone"}
)


def _pair(target: ast.AST, value: ast.expr, found: dict[str, list[ast.expr | None]]) -> None:
    if isinstance(target, ast.Name):
        found.setdefault(target.id, []).append(value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            for part, part_value in zip(target.elts, value.elts):
                _pair(part, part_value, found)
        else:
            for name in target_names(target):
                found.setdefault(name, []).append(None)
