"""What a process runs before a given call: the parent's code path before it starts its
workers (``xmp.spawn``/``torch_xla.launch``), and the code before ``xr.use_spmd()``.

The code before a call is: the calls that come before it in its function (or at module
level), the bodies of the same-module functions those call (transitively), and, when
the call is in a function, the code before each place the module calls that function
(up to the module-level ``if __name__ == "__main__":`` block). Functions passed to the
launcher run in the workers, not in the parent, and are not entered. Order is source
order within a function, as for the rest of the semantic layer; a function defined in
another module is opaque.

Also here, the table of calls that start the XLA runtime in the calling process (XLA208,
XLA210).

Built once per module on first use (``Context.launch``).
"""

from __future__ import annotations

import ast
from functools import cached_property

from xlalint.analysis.parallelism import ParallelismAnalysis
from xlalint.analysis.semantic import Semantic, keyword, parent, string_value
from xlalint.analysis.values import call_sites

# Calls that start the XLA runtime (the PJRT client) in the process that makes them.
# Measured on torch_xla 2.9.0 CPU: each one before `torch_xla.launch(_mp_fn)` makes the
# worker fail with "Runtime is already initialized. Do not use the XLA device before
# calling xmp.spawn." (`xr.global_device_count()` and `xr.global_ordinal()` too, beyond
# the catalog's list.) `xr.device_type()` reads the PJRT_DEVICE setting and does not.
RUNTIME_STARTERS_VERSION = "torch_xla 2.9.0"
RUNTIME_STARTERS = frozenset(
    {
        "torch_xla.device",
        "torch_xla.torch_xla.device",
        "torch_xla.core.xla_model.xla_device",
        "torch_xla.runtime.world_size",
        "torch_xla.runtime.global_runtime_device_count",
        "torch_xla.runtime.global_device_count",
        "torch_xla.runtime.global_ordinal",
        "torch_xla.core.xla_model.get_xla_supported_devices",
    }
)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Bodies that do not run where they stand (a class body does, but holds no launch).
_DEFERRED = (ast.Lambda, ast.ClassDef)
_MAX_DEPTH = 6


class LaunchAnalysis:
    """The code a process runs before a call, for one module."""

    def __init__(self, semantic: Semantic, parallelism: ParallelismAnalysis):
        """``parallelism``: where the file launches its workers."""
        self.semantic = semantic
        self.parallelism = parallelism

    @cached_property
    def targets(self) -> frozenset[int]:
        """The ids of the module functions passed to ``xmp.spawn``/``torch_xla.launch``:
        they run in the workers."""
        found = set()
        for call in self.parallelism.launches:
            target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "fn"), None)
            if isinstance(target, ast.Name) and target.id in self.semantic.module_functions:
                found.add(id(self.semantic.module_functions[target.id]))
        return frozenset(found)

    @cached_property
    def _calls_by_scope(self) -> dict[int, list[ast.Call]]:
        """The calls that run when a function (or the module, key ``id(tree)``) runs,
        in source order: not those in nested functions, lambdas or classes."""
        index: dict[int, list[ast.Call]] = {}
        for call in self.semantic.calls:
            scope = _runs_in(call)
            if scope is not None:
                index.setdefault(id(scope), []).append(call)
        for calls in index.values():
            calls.sort(key=_position)
        return index

    def calls_before(self, call: ast.Call) -> list[ast.Call]:
        """Every call the process makes before ``call`` (see the module docstring)."""
        found: dict[int, ast.Call] = {}
        self._before(call, found, 0, set())
        return sorted(found.values(), key=_position)

    def parent_calls(self) -> list[ast.Call]:
        """The calls the parent makes before its first launch of workers."""
        launches = self.parallelism.launches
        if not launches:
            return []
        found: dict[int, ast.Call] = {}
        for launch in launches:
            for call in self.calls_before(launch):
                found[id(call)] = call
        return sorted(found.values(), key=_position)

    def starts_runtime(self, call: ast.Call) -> bool:
        """``call`` starts the XLA runtime: a call of the table above, ``.to("xla")``, or
        a tensor made with ``device="xla"``."""
        if self.semantic.call_name(call) in RUNTIME_STARTERS:
            return True
        is_to = isinstance(call.func, ast.Attribute) and call.func.attr == "to" and bool(call.args)
        if is_to and _is_xla_device_literal(call.args[0], self.semantic):
            return True
        device = keyword(call, "device")
        return device is not None and _is_xla_device_literal(device.value, self.semantic)

    def _before(self, node: ast.AST, found: dict[int, ast.Call], depth: int, callers: set[int]) -> None:
        scope = _runs_in(node)
        if scope is None:
            return
        where = _position(node)
        for call in self._calls_by_scope.get(id(scope), []):
            if _position(call) >= where:
                break
            self._add(call, found, depth)
        if isinstance(scope, _FUNCTIONS) and depth < _MAX_DEPTH and id(scope) not in callers:
            callers.add(id(scope))
            for site in call_sites(scope, self.semantic):
                self._before(site, found, depth + 1, callers)

    def _add(self, call: ast.Call, found: dict[int, ast.Call], depth: int) -> None:
        """Record ``call`` and everything the same-module function it calls runs."""
        if id(call) in found:
            return
        found[id(call)] = call
        if depth >= _MAX_DEPTH or not isinstance(call.func, ast.Name):
            return
        function = self.semantic.module_functions.get(call.func.id)
        if function is None or id(function) in self.targets:
            return
        for inner in self._calls_by_scope.get(id(function), []):
            self._add(inner, found, depth + 1)


def _runs_in(node: ast.AST) -> ast.AST | None:
    """The function (or module) whose run runs ``node``; None inside a lambda or class body."""
    current = parent(node)
    while current is not None:
        if isinstance(current, (*_FUNCTIONS, ast.Module)):
            return current
        if isinstance(current, _DEFERRED):
            return None
        current = parent(current)
    return None


def _position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def _is_xla_device_literal(expr: ast.AST, semantic) -> bool:
    """``"xla"``, ``"xla:0"``, or ``torch.device("xla")``."""
    if isinstance(expr, ast.Call) and semantic.call_name(expr) == "torch.device" and expr.args:
        expr = expr.args[0]
    text = string_value(expr)
    return text is not None and (text == "xla" or text.startswith("xla:"))
