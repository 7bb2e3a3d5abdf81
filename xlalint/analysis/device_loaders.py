"""Device loaders: which expressions are (or iterate) a torch_xla device loader, whose
iteration is a sync point (``pl.MpDeviceLoader``, ``ParallelLoader.per_device_loader``),
followed through variables, ``self.<attr>``, iterator wrappers and parameters."""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import Semantic, dotted_name, keyword, method_name, parent
from xlalint.analysis.step_apis import ITERATOR_WRAPPERS, MP_DEVICE_LOADER
from xlalint.analysis.values import (
    FUNCTIONS,
    Function,
    assigned_values,
    call_sites,
    enclosing,
    enclosing_scopes,
    is_self_attr,
    parameter_names,
)


def is_device_loader(expr: ast.AST | None, semantic: Semantic) -> bool:
    """``expr`` is (or iterates) a torch_xla device loader: ``pl.MpDeviceLoader(...)``,
    ``pl.ParallelLoader(...).per_device_loader(...)``, a variable or ``self.<attr>``
    assigned one, ``iter(...)``/``enumerate(...)``/``tqdm(...)`` of one, or a
    parameter that every call site in the module fills with one."""
    return DeviceLoaders(semantic).check(expr)


class DeviceLoaders:
    """Device-loader resolution with a guard against cycles (``a = b; b = a``)."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        self.active: set[int] = set()

    def check(self, expr: ast.AST | None) -> bool:
        if expr is None or id(expr) in self.active:
            return False
        self.active.add(id(expr))
        try:
            return self._check(expr)
        finally:
            self.active.discard(id(expr))

    def _check(self, expr: ast.AST) -> bool:
        semantic = self.semantic
        if isinstance(expr, ast.Call):
            name = semantic.call_name(expr)
            if name in MP_DEVICE_LOADER:
                return True
            if method_name(expr) == "per_device_loader":
                return True
            func = dotted_name(expr.func) or ""
            if func.rsplit(".", 1)[-1] in ITERATOR_WRAPPERS:
                return any(self.check(arg) for arg in expr.args)
            return False
        if isinstance(expr, ast.Name):
            return self._name(expr)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
            cls = enclosing(expr, ast.ClassDef)
            if cls is None:
                return False
            return any(self.check(value) for value in assigned_values(cls, lambda t: is_self_attr(t, expr.attr)))
        return False

    def _name(self, name: ast.Name) -> bool:
        for scope in enclosing_scopes(name):
            values = list(assigned_values(scope, lambda t: isinstance(t, ast.Name) and t.id == name.id, shallow=True))
            is_parameter = isinstance(scope, FUNCTIONS) and name.id in parameter_names(scope)
            if any(self.check(v) for v in values):
                return True
            # A parameter rebound from itself (``loader = itertools.islice(loader, n)``)
            # still holds what the callers passed.
            if is_parameter:
                return self._parameter(scope, name.id)
            if values:
                return False
        return False

    def _parameter(self, func: Function, param: str) -> bool:
        """Every call of ``func`` in the module passes a device loader for ``param``."""
        calls = list(call_sites(func, self.semantic))
        if not calls:
            # A method overriding one of a base class from another module (the
            # train_loop_fn(self, loader, ...) of a subclassed example trainer) is called
            # by that base class: what it receives is unknown, so assume the common case
            # of an XLA trainer and do not report its loop as unsynced.
            return _overrides_imported_class(func, self.semantic)
        args = func.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        if positional and positional[0] in ("self", "cls") and enclosing(func, ast.ClassDef) is not None:
            positional = positional[1:]
        for call in calls:
            value: ast.expr | None = None
            if param in positional and positional.index(param) < len(call.args):
                value = call.args[positional.index(param)]
                if any(isinstance(a, ast.Starred) for a in call.args[: positional.index(param) + 1]):
                    return False
            kw = keyword(call, param)
            if kw is not None:
                value = kw.value
            if not self.check(value):
                return False
        return True


def _overrides_imported_class(func: Function, semantic: Semantic) -> bool:
    """``func`` is a method of a class whose base is a class imported from another,
    non-library module (opaque: its callers are out of sight)."""
    cls = parent(func)
    if not isinstance(cls, ast.ClassDef) or not parameter_names(func) & {"self", "cls"}:
        return False
    for base in cls.bases:
        if not isinstance(base, (ast.Name, ast.Attribute)):
            continue
        name = semantic.qualified_name(base) or ""
        root = name.split(".", 1)[0]
        if name and root not in _LIBRARY_ROOTS and "." in name:
            return True
    return False


# Packages whose classes are not user trainers (nn.Module, Dataset, HF models...).
_LIBRARY_ROOTS = frozenset(
    {"torch", "torch_xla", "transformers", "accelerate", "lightning", "pytorch_lightning", "builtins"}
)
