"""Devices: which expression is a device (a CUDA one, the XLA one, any), what device a
variable holds, whether a branch is the CUDA path, and whether code runs at import time.

A script written for a GPU names its device in many ways (``"cuda:0"``,
``torch.device(f"cuda:{rank}")``, ``"cuda" if torch.cuda.is_available() else "cpu"``, an
int index, ``torch.accelerator.current_accelerator()``); a script written for XLA names
``torch_xla.device()`` or ``"xla"``. Rules ask this analysis (``ctx.devices``) rather
than each spelling it out. Answers are flow-insensitive within a scope, as in
:mod:`xlalint.analysis.values`.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property

from xlalint.analysis.semantic import Semantic, ancestors, method_name, parent, string_value, subtree
from xlalint.analysis.syntax import argument, is_self_attribute
from xlalint.analysis.values import (
    ScopeValues,
    assigned_values,
    assigned_values_by_name,
    call_sites,
    is_self_attr,
    passed_argument,
)

# "cuda", "cuda:0", "cuda:12" -- the strings torch reads as a CUDA device.
CUDA_STRING = re.compile(r"cuda(:\d+)?")
# The other device strings: the "else" branch of a device selection.
OTHER_DEVICES = re.compile(r"(cpu|mps|xla|xpu|hpu|meta|tpu)(:\d+)?")

TORCH_DEVICE = frozenset({"torch.device"})
# Calls whose presence in a condition means "is there a CUDA device?".
AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.cuda.device_count", "torch.accelerator.is_available"})
# The calls that are False on an XLA machine: a condition built on them keeps the CPU path.
IS_AVAILABLE = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
CURRENT_ACCELERATOR = frozenset({"torch.accelerator.current_accelerator"})
# The launchers that start worker processes: each worker must create the runtime itself.
SPAWNERS = frozenset(
    {"torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch", "torch_xla.torch_xla.launch"}
)
FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# Keyword arguments whose value is a device, in any call.
DEVICE_KEYWORDS = frozenset({"device"})
# Tensor methods only CUDA runs, with no XLA counterpart: on torch 2.9 / torch_xla 2.9 with
# no GPU, `x.pin_memory()` raises "Found no NVIDIA driver on your system".
CUDA_ONLY_METHODS = frozenset({"pin_memory"})
# Keyword arguments only CUDA takes when true: `torch.optim.AdamW(fused=True)` of XLA
# parameters raises ("`fused=True` requires all the params to be ... of supported devices").
CUDA_ONLY_KEYWORDS = frozenset({"fused"})
# The calls that return this process's XLA device.
XLA_DEVICE_CALLS = frozenset({"torch_xla.device", "torch_xla.torch_xla.device", "torch_xla.core.xla_model.xla_device"})


def is_cuda_string(node: ast.AST | None) -> bool:
    """``"cuda"``, ``"cuda:1"``, ``f"cuda:{rank}"``, ``"cuda:{}".format(r)``, ``"cuda:%d" % r``."""
    value = string_value(node)
    if value is not None:
        return CUDA_STRING.fullmatch(value) is not None
    if isinstance(node, ast.JoinedStr) and node.values:
        head = string_value(node.values[0])
        if head is None:
            return False
        return head == "cuda:" if len(node.values) > 1 else CUDA_STRING.fullmatch(head) is not None
    if isinstance(node, ast.Call) and method_name(node) == "format":
        return (string_value(node.func.value) or "").startswith("cuda:")  # type: ignore[attr-defined]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return (string_value(node.left) or "").startswith("cuda:")
    return False


def is_device_index(node: ast.AST | None) -> bool:
    """An integer literal given as a device: CUDA device N."""
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
        and node.value >= 0
    )


def is_cuda_storage_lambda(node: ast.AST | None) -> bool:
    """``lambda storage, loc: storage.cuda()``, the old spelling of ``map_location="cuda"``."""
    return isinstance(node, ast.Lambda) and method_name(node.body) == "cuda"


def is_other_device_string(node: ast.AST | None) -> bool:
    value = string_value(node)
    return value is not None and OTHER_DEVICES.fullmatch(value) is not None


def inspects_device_string(test: ast.expr) -> bool:
    """The condition looks at a CUDA string (``"cuda" in device``, ``device == "cuda"``,
    ``device.startswith("cuda")``): it classifies an existing device."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and any(is_cuda_string(n) for n in (node.left, *node.comparators)):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and any(is_cuda_string(a) for a in node.args)
        ):
            return True
    return False


def condition_holding(call: ast.AST) -> ast.If | ast.IfExp | None:
    """The ``if`` statement or conditional expression whose test holds ``call``."""
    child: ast.AST = call
    for holder in ancestors(call):
        if isinstance(holder, (ast.If, ast.IfExp)):
            return holder if child is holder.test else None
        if isinstance(holder, ast.stmt):
            return None
        child = holder
    return None


def _is_name(node: ast.AST | None, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


# What ``DeviceAnalysis._scope_names`` gives names to: the function scopes and the module.
_SCOPES = (*FUNCTION_SCOPES, ast.Module)


def _parameters(func: ast.AST) -> set[str]:
    args = func.args  # type: ignore[attr-defined]
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}


def _names_in(target: ast.AST) -> list[str]:
    """The ``Name``s in a target, whatever their context (``for a[i] in ...``: ``a``, ``i``)."""
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _int_parameter(func: ast.AST, name: str) -> bool:
    """``name`` is a parameter of ``func`` annotated ``int``."""
    args = func.args  # type: ignore[attr-defined]
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.arg == name:
            return _is_name(arg.annotation, "int") if arg.annotation is not None else False
    return False


class DeviceAnalysis:
    """The device facts of one module, computed on first use."""

    def __init__(self, tree: ast.Module, semantic: Semantic):
        self.tree = tree
        self.semantic = semantic
        self._locals: dict[int, set[str]] = {}
        self._uses_by_scope: dict[str, dict[int, list[ast.Name]]] = {}
        self._device_variables: dict[int, ast.Assign | None] = {}
        self._scope_values = ScopeValues(semantic)
        self._device_parameters: dict[int, str | None] = {}
        self._device_attributes: dict[int, tuple[str, ast.stmt] | None] = {}

    # -- where code runs ------------------------------------------------------------------
    @cached_property
    def spawns_workers(self) -> bool:
        """The script starts worker processes (``xmp.spawn``, ``torch_xla.launch``)."""
        return any(self.semantic.call_name(c) in SPAWNERS for c in self.semantic.calls)

    def evaluated_at_import(self, node: ast.AST) -> bool:
        """A default argument (evaluated when the ``def`` runs), a command-line option's
        ``default=`` (evaluated while the parser is built, whether or not the option is
        given), or module-level code in a script that spawns workers: the
        parent would create the XLA runtime before the launcher, and every worker fails
        with "Runtime is already initialized"."""
        for holder in ancestors(node):
            if isinstance(holder, ast.arguments):
                return True
            if isinstance(holder, ast.keyword) and holder.arg == "default" and _is_add_argument(parent(holder)):
                return True
            if isinstance(holder, FUNCTION_SCOPES):
                return False
        return self.spawns_workers

    # -- variables ------------------------------------------------------------------------
    def scope_of(self, name: ast.Name) -> ast.AST:
        """The function whose local ``name`` is, or the module."""
        for scope in ancestors(name):
            if isinstance(scope, FUNCTION_SCOPES) and name.id in self._function_locals(scope):
                return scope
        return self.tree

    def values_of(self, name: ast.Name) -> list[ast.AST]:
        """The values assigned to ``name`` in its own scope (not in nested functions)."""
        return list(assigned_values(self.scope_of(name), lambda t: _is_name(t, name.id), shallow=True))

    def variable_uses(self, name: ast.Name) -> list[ast.Name]:
        """Every ``Name`` of the variable ``name`` is (the same spelling in the same
        scope), ``name`` included, in source order. Grouped by scope once per spelling:
        each of many functions asks for its own ``scaler``."""
        by_scope = self._uses_by_scope.get(name.id)
        if by_scope is None:
            by_scope = self._uses_by_scope[name.id] = {}
            for node in self.semantic.names_with_id(name.id):
                by_scope.setdefault(id(self.scope_of(node)), []).append(node)
        return by_scope.get(id(self.scope_of(name)), [])

    def first_read(self, name: ast.Name) -> ast.Name | None:
        """A read of the variable ``name`` binds, in its scope."""
        return next((node for node in self.variable_uses(name) if isinstance(node.ctx, ast.Load)), None)

    def _function_locals(self, func: ast.AST) -> set[str]:
        """The names local to ``func``: its parameters and the names stored anywhere in
        it (``subtree``), but those declared ``global`` or ``nonlocal`` there."""
        if id(func) not in self._locals:
            stored, declared, _ = self._scope_names
            names = _parameters(func) | stored.get(id(func), set())
            self._locals[id(func)] = names - declared.get(id(func), set())
        return self._locals[id(func)]

    @cached_property
    def _scope_names(self) -> tuple[dict[int, set[str]], dict[int, set[str]], dict[int, set[str]]]:
        """For each function (and the module), by id: the names stored in it, those
        declared ``global``/``nonlocal`` in it, and those bound other than by an
        assignment in it (``_bound_otherwise``), nested functions included. One pass
        over the module's binding nodes, each given to every scope around it (a node is
        in a scope's ``subtree`` when the scope is the node or above it): walking each
        function for them was half of XLA104's time on a file of many functions."""
        stored: dict[int, set[str]] = {}
        declared: dict[int, set[str]] = {}
        otherwise: dict[int, set[str]] = {}

        def give(node: ast.AST, names, *into: dict[int, set[str]]) -> None:
            if not names:
                return
            scope: ast.AST | None = node
            while scope is not None:
                if isinstance(scope, _SCOPES):
                    for found in into:
                        found.setdefault(id(scope), set()).update(names)
                scope = parent(scope)

        semantic = self.semantic
        for name in semantic.nodes_of(ast.Name):
            if isinstance(name.ctx, ast.Store):
                give(name, (name.id,), stored)
        for node in semantic.nodes_of(ast.For, ast.AsyncFor, ast.comprehension):
            give(node, _names_in(node.target), otherwise)
        for node in semantic.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            give(node, (node.name,), otherwise)
        for node in semantic.nodes_of(ast.Import, ast.ImportFrom):
            give(node, [alias.asname or alias.name.split(".")[0] for alias in node.names], otherwise)
        for node in semantic.nodes_of(ast.AugAssign, ast.NamedExpr):
            give(node, _names_in(node.target), otherwise)
        for node in semantic.nodes_of(ast.withitem):
            if node.optional_vars is not None:
                give(node, _names_in(node.optional_vars), otherwise)
        for node in semantic.nodes_of(ast.Global, ast.Nonlocal):
            give(node, node.names, declared, otherwise)
        return stored, declared, otherwise

    @cached_property
    def _cuda_assignments(self) -> dict[tuple[int, str], list[ast.AST]]:
        found: dict[tuple[int, str], list[ast.AST]] = {}
        for node in self.semantic.nodes_of(ast.Assign):
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and self.is_cuda_device(node.value):
                key = (id(self.scope_of(node.targets[0])), node.targets[0].id)
                found.setdefault(key, []).append(node.value)
        return found

    def cuda_values(self, name: ast.Name) -> list[ast.AST]:
        """The CUDA devices the variable ``name`` is assigned in its scope (``device = "cuda"``)."""
        return self._cuda_assignments.get((id(self.scope_of(name)), name.id), [])

    # -- which expression is a device -------------------------------------------------------
    def is_device_selection(self, node: ast.AST | None) -> bool:
        """``"cuda" if torch.cuda.is_available() else "cpu"``: a conditional with a CUDA
        branch whose condition asks about CUDA, or whose other branch is a device."""
        if not isinstance(node, ast.IfExp):
            return False
        branches = (node.body, node.orelse)
        cuda = [b for b in branches if self.is_cuda_device(b)]
        if not cuda:
            return False
        asks_cuda = any(
            self.semantic.call_name(n) in AVAILABILITY for n in ast.walk(node.test) if isinstance(n, ast.Call)
        )
        if not asks_cuda and inspects_device_string(node.test):
            # ``"cuda" if "cuda" in device else "cpu"`` derives a device *type* from a
            # device reported where it is set; as a type it feeds `autocast(device_type=)`
            # and string comparisons, which `torch_xla.device()` would break.
            return False
        other = [b for b in branches if b not in cuda]
        return asks_cuda or not other or any(self.is_any_device(b) for b in other)

    def is_cuda_device(self, node: ast.AST) -> bool:
        """A CUDA device value: a CUDA string, ``torch.device(<cuda>)``, a selection."""
        if is_cuda_string(node):
            return True
        if isinstance(node, ast.Call) and self.semantic.call_name(node) in TORCH_DEVICE:
            return self.torch_device_is_cuda(node)
        if isinstance(node, ast.Call) and self.semantic.call_name(node) in CURRENT_ACCELERATOR:
            return True
        return self.is_device_selection(node)

    def is_any_device(self, node: ast.AST) -> bool:
        if is_other_device_string(node) or self.is_cuda_device(node):
            return True
        if isinstance(node, ast.Call):
            name = self.semantic.call_name(node) or ""
            return name in TORCH_DEVICE or name.startswith("torch_xla.")
        return isinstance(node, ast.IfExp) and (self.is_any_device(node.body) or self.is_any_device(node.orelse))

    def torch_device_is_cuda(self, call: ast.Call) -> bool:
        kind = argument(call, 0, "type")
        return is_cuda_string(kind) or is_device_index(kind) or self.is_device_selection(kind)

    def is_plain_device(self, node: ast.AST) -> bool:
        """A device written as such (``"cpu"``, ``torch.device("cuda")``, the XLA device),
        not the user's own logic (an environment variable, a command-line option)."""
        if is_other_device_string(node) or self.is_cuda_device(node):
            return True
        if isinstance(node, ast.Call):
            name = self.semantic.call_name(node) or ""
            if name in TORCH_DEVICE:
                kind = argument(node, 0, "type")
                return kind is None or is_other_device_string(kind) or self.is_plain_device(kind)
            return name.startswith("torch_xla.")
        if isinstance(node, ast.IfExp):
            return self.is_plain_device(node.body) and self.is_plain_device(node.orelse)
        return False

    def fallback_of(self, node: ast.AST) -> ast.AST | None:
        """The non-CUDA branch of a device selection when it is the user's logic (an
        environment variable, a command-line option), not a plain device like ``"cpu"``."""
        selection = node
        if isinstance(node, ast.Call) and self.semantic.call_name(node) in TORCH_DEVICE:
            selection = argument(node, 0, "type")
        if not isinstance(selection, ast.IfExp):
            return None
        for branch in (selection.body, selection.orelse):
            if not self.is_plain_device(branch):
                return branch
        return None

    def names_xla_device(self, node: ast.AST) -> bool:
        """``[torch_xla.device()]``, ``[xm.xla_device()]``, ``torch.device("xla")``, or a
        variable assigned one: a script already written for XLA."""

        def mentions_xla(expr: ast.AST) -> bool:
            for sub in ast.walk(expr):
                if isinstance(sub, ast.Call) and (self.semantic.call_name(sub) or "").startswith("torch_xla."):
                    return True
                if (string_value(sub) or "").startswith("xla"):
                    return True
            return False

        if mentions_xla(node):
            return True
        for name in (n for n in ast.walk(node) if isinstance(n, ast.Name)):
            if any(mentions_xla(value) for value in self.values_of(name)):
                return True
        return False

    def xla_device_variable(self, node: ast.AST) -> str | None:
        """A variable that holds the XLA device wherever ``node`` runs once the file is
        ported, for a fix to write instead of calling ``torch_xla.device()`` again:

        - assigned ``torch_xla.device()`` (or ``xm.xla_device()``, or a CUDA device the
          port turns into it) by a statement of the function's (or module's) own body
          before ``node``, and never assigned anything else in that scope;
        - such a module variable, read in a function defined after it that binds nothing
          of that name (nor do the functions around it);
        - a parameter (``def evaluate(model, loader, device)``) that every call in the
          module passes such a variable, and that the function never rebinds;
        - ``self.<attr>`` that every assignment in the class makes such a device, one of
          them in ``__init__`` (``self.device = torch.device("cuda")``)."""
        scope = next((a for a in ancestors(node) if isinstance(a, FUNCTION_SCOPES)), self.tree)
        if not isinstance(getattr(scope, "body", None), list):
            return None  # a lambda
        first = self._device_variable_assignment(scope)
        if first is not None and first.lineno < getattr(node, "lineno", 0):
            return first.targets[0].id  # type: ignore[attr-defined]
        if scope is self.tree:
            return None
        return self._global_device(node, scope) or self._device_parameter(scope) or self._device_attribute(node)

    def _global_device(self, node: ast.AST, scope: ast.AST) -> str | None:
        module_first = self._device_variable_assignment(self.tree)
        if module_first is None or self.spawns_workers:
            return None  # a worker creates its own device (the module's is `torch.device("xla")`)
        name = module_first.targets[0].id  # type: ignore[attr-defined]
        top = next((a for a in ancestors(node) if parent(a) is self.tree), None)
        if top is None or module_first.lineno >= top.lineno:
            return None
        for function in (a for a in ancestors(node) if isinstance(a, FUNCTION_SCOPES)):
            if name in self._function_locals(function):
                return None
        return name

    def _device_parameter(self, scope: ast.AST) -> str | None:
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        if id(scope) in self._device_parameters:
            return self._device_parameters[id(scope)]
        self._device_parameters[id(scope)] = None  # a recursive call asks again: no answer there
        found = None
        values = None
        for arg in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs):
            if "device" not in arg.arg:
                continue
            if values is None:
                values = assigned_values_by_name(scope, shallow=True)
            if values.get(arg.arg):
                continue  # rebound in the function
            calls = list(call_sites(scope, self.semantic))
            passed = [passed_argument(call, scope, arg.arg) for call in calls]
            if calls and all(
                isinstance(value, ast.Name) and self.xla_device_variable(call) == value.id
                for call, value in zip(calls, passed)
            ):
                found = arg.arg
                break
        self._device_parameters[id(scope)] = found
        return found

    def _device_attribute(self, node: ast.AST) -> str | None:
        owner = next((a for a in ancestors(node) if isinstance(a, ast.ClassDef)), None)
        method = next((a for a in ancestors(node) if isinstance(a, FUNCTION_SCOPES)), None)
        if (
            owner is None
            or not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
            or parent(method) is not owner
        ):
            return None
        if not method.args.args or method.args.args[0].arg != "self":
            return None
        attribute = self._device_attributes.get(id(owner), ...)
        if attribute is ...:
            attribute = self._device_attribute_of(owner)
            self._device_attributes[id(owner)] = attribute
        if attribute is None:
            return None
        name, assignment = attribute
        if method.name == "__init__" and assignment.lineno >= getattr(node, "lineno", 0):
            return None
        return f"self.{name}"

    def _device_attribute_of(self, owner: ast.ClassDef) -> tuple[str, ast.stmt] | None:
        """The ``self.<attr>`` that ``__init__`` assigns an XLA device (after the port) and
        no statement of the class assigns anything else."""
        init = next((s for s in owner.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            return None
        for statement in init.body:
            if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
                continue
            target = statement.targets[0]
            if not (is_self_attribute(target) and self._is_xla_device_after_port(statement.value)):
                continue
            attr = target.attr  # type: ignore[attr-defined]
            values = list(assigned_values(owner, lambda t, attr=attr: is_self_attr(t, attr)))
            if all(self._is_xla_device_after_port(v) for v in values) and not self._attribute_bound_otherwise(
                owner, attr
            ):
                return attr, statement
        return None

    def _attribute_bound_otherwise(self, owner: ast.ClassDef, attr: str) -> bool:
        """``self.<attr>`` bound other than by an assignment (``for self.device in ...``,
        ``self.device += ...``, a ``with ... as self.device``)."""
        for node in subtree(owner):
            if isinstance(node, (ast.For, ast.AsyncFor, ast.AugAssign, ast.AnnAssign, ast.withitem, ast.NamedExpr)):
                target = node.optional_vars if isinstance(node, ast.withitem) else getattr(node, "target", None)
                if target is not None and any(is_self_attr(t, attr) for t in ast.walk(target)):
                    return True
        return False

    def _device_variable_assignment(self, scope: ast.AST) -> ast.Assign | None:
        """The first statement of ``scope``'s own body that assigns a variable the XLA
        device for good (see ``xla_device_variable``). Found once per scope: every
        ``.cuda()`` of a scope asks, and a scan per question made a check quadratic."""
        if id(scope) in self._device_variables:
            return self._device_variables[id(scope)]
        found = None
        bound: frozenset[str] | None = None
        for stmt in scope.body:  # type: ignore[attr-defined]
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            target = stmt.targets[0]
            if not self._is_xla_device_after_port(stmt.value) or self.scope_of(target) is not scope:
                continue
            if bound is None:
                bound = self._bound_otherwise(scope)
            values = self._scope_values.of(scope, target.id)
            if target.id not in bound and all(self._is_xla_device_after_port(v) for v in values):
                found = stmt
                break
        self._device_variables[id(scope)] = found
        return found

    def _is_xla_device_after_port(self, node: ast.AST) -> bool:
        """The XLA device, or a CUDA device that XLA104 ports to it (``torch.device("cuda" if
        ... else "cpu")``): where the port is not applied, the variable still names the
        device the script moves its data to, so the model follows it there too."""
        return self._is_xla_device_call(node) or self.is_cuda_device(node)

    def _is_xla_device_call(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and not node.args and self.semantic.call_name(node) in XLA_DEVICE_CALLS

    def _bound_otherwise(self, scope: ast.AST) -> frozenset[str]:
        """The names that are a parameter, a loop or ``with`` target, an import or a
        definition in ``scope``: they may hold something else on some path."""
        params = _parameters(scope) if isinstance(scope, FUNCTION_SCOPES) else set()
        return frozenset(params | self._scope_names[2].get(id(scope), set()))

    def parameter_default(self, name: ast.Name) -> ast.expr | None:
        """The default of the parameter ``name`` reads (``def setup(rank, backend="nccl")``)."""
        scope = self.scope_of(name)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return None
        args = scope.args
        positional = [*args.posonlyargs, *args.args]
        pairs = [*zip(positional[len(positional) - len(args.defaults) :], args.defaults)]
        pairs += [(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default is not None]
        return next((default for arg, default in pairs if arg.arg == name.id), None)

    # -- the CUDA path ------------------------------------------------------------------------
    def chooses_device(self, condition: ast.If | ast.IfExp) -> bool:
        """A branch of ``condition`` is a device, sets one or uses one: ``.cuda()``,
        ``.to(...)``, a ``torch.device``, the current accelerator, ``device = "cuda"``."""
        if isinstance(condition, ast.IfExp):
            if any(self.is_any_device(b) for b in (condition.body, condition.orelse)):
                return True
            branches: list[ast.AST] = [condition.body, condition.orelse]
        else:
            branches = [*condition.body, *condition.orelse]
        for branch in branches:
            for node in ast.walk(branch):
                if isinstance(node, ast.Call):
                    if method_name(node) in ("cuda", "to"):
                        return True
                    if self.semantic.call_name(node) in TORCH_DEVICE | CURRENT_ACCELERATOR:
                        return True
                elif isinstance(node, ast.Assign) and self.is_any_device(node.value):
                    return True
        return False

    def decided_later(self, condition: ast.If) -> ast.stmt | None:
        """The statement after ``condition`` that decides the device its branches set:
        ``if torch.cuda.is_available(): device = torch.device("cuda")`` followed, in the
        same block, by ``device = xm.xla_device()``. Every statement of the branches must
        be such an assignment, and nothing between may read the name."""
        container = parent(condition)
        siblings = next(
            (
                block
                for block in (getattr(container, f, None) for f in ("body", "orelse", "finalbody"))
                if isinstance(block, list) and any(s is condition for s in block)
            ),
            None,
        )
        branches = [*condition.body, *condition.orelse]
        if siblings is None or not branches:
            return None
        names = set()
        for stmt in branches:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                return None
            names.add(stmt.targets[0].id)
        after = siblings[next(i for i, s in enumerate(siblings) if s is condition) + 1 :]
        deciding = None
        for name in names:
            for stmt in after:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
                if isinstance(target, ast.Name) and target.id == name:
                    if not self.names_xla_device(stmt.value):
                        return None
                    deciding = stmt if deciding is None or stmt.lineno > deciding.lineno else deciding
                    break
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(stmt)):
                    return None  # read (or bound some other way) before it is decided
            else:
                return None
        return deciding

    # -- int devices ----------------------------------------------------------------------------
    def holds_device_index(self, node: ast.AST) -> bool:
        """A variable or ``self.<attr>`` that only ever holds an int: each assignment is
        an int literal, ``int(...)`` (``local_rank = int(os.environ["LOCAL_RANK"])``) or
        a parameter annotated ``int``; or a parameter annotated ``int`` itself. Given as a
        device, torch reads it as CUDA device N."""
        last = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if last not in self._int_candidates:
            return False  # most device arguments: nothing of that name is ever an int
        if isinstance(node, ast.Name):
            scope = self.scope_of(node)
            values = self.values_of(node)
            if scope is not self.tree and _int_parameter(scope, node.id):
                return not values
        elif is_self_attribute(node):
            owner = next((a for a in ancestors(node) if isinstance(a, ast.ClassDef)), None)
            if owner is None:
                return False
            values = list(assigned_values(owner, lambda t: is_self_attr(t, node.attr)))  # type: ignore[attr-defined]
        else:
            return False
        return bool(values) and all(self._is_int(value) for value in values)

    @cached_property
    def _int_candidates(self) -> frozenset[str]:
        """The names (and ``self.<attr>`` attributes) that something in the module may make
        an int: parameters annotated ``int``, and targets assigned an int literal,
        ``int(...)`` or one of those parameters. A cheap first test for
        ``holds_device_index``, which runs on every device argument."""
        parameters = {
            arg.arg
            for arg in self.semantic.nodes_of(ast.arg)
            if arg.annotation is not None and _is_name(arg.annotation, "int")
        }
        names = set(parameters)
        for statement in self.semantic.nodes_of(ast.Assign, ast.AnnAssign):
            value = statement.value
            if value is None or not (
                is_device_index(value)
                or (isinstance(value, ast.Name) and value.id in parameters)
                or (isinstance(value, ast.Call) and _is_name(value.func, "int"))
            ):
                continue
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(
                t.id if isinstance(t, ast.Name) else t.attr for t in targets if isinstance(t, (ast.Name, ast.Attribute))
            )
        return frozenset(names)

    def _is_int(self, value: ast.AST) -> bool:
        if is_device_index(value):
            return True
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "int":
            return True
        if isinstance(value, ast.Name):
            scope = self.scope_of(value)
            return scope is not self.tree and _int_parameter(scope, value.id)
        return False


def _is_add_argument(call: ast.AST | None) -> bool:
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"
