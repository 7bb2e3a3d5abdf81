"""The APIs the step analysis (``xlalint.analysis.steps``) knows by name: torch_xla's sync
points, step closures, device loaders and ``torch_xla.compile``; what applies the
gradients (optimizer steps, their closures) and what makes them (backward calls)."""

from __future__ import annotations

import ast

from xlalint.analysis import told
from xlalint.analysis.semantic import (
    Semantic,
    dotted_name,
    enclosing_function,
    keyword,
    method_name,
    parent,
    string_value,
)
from xlalint.analysis.values import FUNCTIONS, bound_arguments

XM = "torch_xla.core.xla_model"
PL = "torch_xla.distributed.parallel_loader"
ADD_STEP_CLOSURE = frozenset({f"{XM}.add_step_closure"})
SYNC_CALLS = frozenset(
    {
        "torch_xla.sync",
        "torch_xla.torch_xla.sync",
        f"{XM}.mark_step",
        "torch_xla._XLAC._xla_step_marker",
    }
)
# A CUDA wait for the device, alone on its line: XLA104's safe fix makes it
# `torch_xla.sync()` then `xm.wait_device_ops()`, so in the port it is a sync point (a
# second sync added after it would cut the step's graph twice).
CUDA_WAITS = frozenset({"torch.cuda.synchronize", "torch.accelerator.synchronize"})
OPTIMIZER_STEP = frozenset({f"{XM}.optimizer_step"})
OPTIMIZER_MODULES = ("torch.optim.", "torch_xla.amp.syncfree.")
STEP_CONTEXT = frozenset({"torch_xla.step", "torch_xla.torch_xla.step"})
COMPILE = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
MP_DEVICE_LOADER = frozenset({f"{PL}.MpDeviceLoader"})
PARALLEL_LOADER = frozenset({f"{PL}.ParallelLoader"})
AUTOGRAD_BACKWARD = frozenset({"torch.autograd.backward"})
# Library objects whose call runs the whole update: timm's `NativeScaler`
# (`loss_scaler(loss, optimizer, clip_grad=...)`) scales the loss, runs its backward,
# unscales and clips when asked, steps the optimizer through the `torch.cuda.amp.GradScaler`
# it holds, and updates the scale.
LOSS_SCALERS = frozenset(
    {
        "timm.utils.NativeScaler",
        "timm.utils.cuda.NativeScaler",
        "timm.utils.NativeScalerWithGradNormCount",
    }
)
# How many calls deep a loss scaler passed on from parameter to parameter is followed.
SCALER_PASSES = 3
# Wrappers that iterate what they wrap lazily: iterating them iterates the loader.
ITERATOR_WRAPPERS = frozenset({"enumerate", "iter", "zip", "tqdm", "trange", "islice", "chain", "cycle"})


def optimizer_closure(call: ast.Call, semantic: Semantic) -> ast.expr | None:
    """The closure an optimizer step is given: ``opt.step(closure)``,
    ``opt.step(closure=closure)``, ``xm.optimizer_step(opt, optimizer_args={"closure": closure})``.
    The step calls it (LBFGS several times) to re-evaluate the loss, so its backward
    makes the gradients the step uses."""
    passed: ast.expr | None = None
    if semantic.call_name(call) in OPTIMIZER_STEP:
        named = keyword(call, "optimizer_args")
        if named is not None and isinstance(named.value, ast.Dict):
            options = named.value
            passed = next((v for k, v in zip(options.keys, options.values) if string_value(k) == "closure"), None)
    elif method_name(call) == "step":
        receiver = call.func.value  # type: ignore[attr-defined]
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
            return None
        if len(call.args) == 1 and not call.keywords and not isinstance(call.args[0], ast.Starred):
            passed = call.args[0]
        elif not call.args and (named := keyword(call, "closure")) is not None:
            passed = named.value
    return None if isinstance(passed, ast.Constant) and passed.value is None else passed


def is_optimizer_step(call: ast.Call, semantic: Semantic, optimizers: frozenset[str] = frozenset()) -> bool:
    """A call that applies the gradients: ``opt.step()`` (a name in ``optimizers`` or
    one that says so: ``optimizer``, ``self.opt``; not a scheduler), ``scaler.step(opt)``,
    ``xm.optimizer_step(opt)``."""
    if semantic.call_name(call) in OPTIMIZER_STEP or is_loss_scaler_call(call, semantic):
        return True
    if method_name(call) != "step":
        return False
    receiver = dotted_name(call.func.value) or ""  # type: ignore[attr-defined]
    last = receiver.rsplit(".", 1)[-1].lower()
    if "scaler" in last:
        return bool(call.args)
    return receiver in optimizers or names_an_optimizer(receiver)


def names_an_optimizer(name: str) -> bool:
    """The last part of a dotted name says it is an optimizer (``optimizer``, ``self.opt``,
    ``d_optim``), not a scheduler or an options object."""
    last = name.rsplit(".", 1)[-1].lower()
    return "opt" in last and "sched" not in last and not last.startswith("option")


def is_backward_call(call: ast.Call, semantic: Semantic) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``torch.autograd.backward(...)``,
    ``accelerator.backward(loss)``, a timm ``NativeScaler`` called on the loss."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "backward":
        return True
    if semantic.call_name(call) in AUTOGRAD_BACKWARD or is_loss_scaler_call(call, semantic):
        return True
    return importer_bound_kind(call, semantic) == told.BACKWARD


def loss_scaler_names(semantic: Semantic) -> frozenset[str]:
    """The dotted names (``loss_scaler``, ``self.scaler``) assigned a library loss scaler
    (``LOSS_SCALERS``) in the module; found once per module."""
    found = semantic.__dict__.get("_xlalint_loss_scalers")
    if found is None:
        names: set[str] = set()
        if any(semantic.imports.imports_module(m) for m in ("timm",)):
            for call in semantic.calls:
                if semantic.call_name(call) in LOSS_SCALERS:
                    statement = parent(call)
                    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is call:
                        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                        names.update(n for t in targets if (n := dotted_name(t)))
        found = semantic.__dict__["_xlalint_loss_scalers"] = frozenset(names)
    return found


def loss_scaler_parameters(semantic: Semantic) -> frozenset[tuple[int, str]]:
    """(function id, parameter) for each parameter of the module's functions that a call
    binds to a library loss scaler (``values.bound_arguments``): a name assigned one
    (``train_one_epoch(..., scaler)`` where ``scaler = NativeScaler()``), one built in the
    call, a parameter bound to one passed on (``SCALER_PASSES`` calls deep). Found once per
    module, only when the module builds one."""
    found = semantic.__dict__.get("_xlalint_loss_scaler_parameters")
    if found is None:
        pairs: set[tuple[int, str]] = set()
        names = loss_scaler_names(semantic)
        if names or (
            semantic.imports.imports_module("timm")
            and any(semantic.call_name(call) in LOSS_SCALERS for call in semantic.calls)
        ):
            functions = list(semantic.nodes_of(*FUNCTIONS))
            for _ in range(SCALER_PASSES):
                before = len(pairs)
                for function in functions:
                    for parameter, values in bound_arguments(function, semantic).items():
                        if (id(function), parameter) not in pairs and any(
                            value is not None and _holds_loss_scaler(value, names, pairs, semantic) for value in values
                        ):
                            pairs.add((id(function), parameter))
                if len(pairs) == before:
                    break
        found = semantic.__dict__["_xlalint_loss_scaler_parameters"] = frozenset(pairs)
    return found


def importer_bound_parameters(semantic: Semantic) -> dict[tuple[int, str], str]:
    """(function id, parameter) -> what calling it runs (``told.BACKWARD``,
    ``told.UPDATE``), for each parameter of the module's functions bound to a step
    callable by the XLA scripts that import the module (``Semantic.told``: ``main.py``
    passes its ``NativeScaler()`` to ``train_one_epoch``), and for the parameters of this
    module's functions those are passed on to (``values.bound_arguments``,
    ``SCALER_PASSES`` calls deep). Found once per module, only when it was told one."""
    found = semantic.__dict__.get("_xlalint_importer_bound")
    if found is None:
        found = {}
        for fact in semantic.told:
            parsed = told.parse_bound(fact)
            function = semantic.module_functions.get(parsed[0]) if parsed is not None else None
            if function is None:
                continue
            _, parameter, kind = parsed  # type: ignore[misc]
            if isinstance(parameter, int):
                positional = [p.arg for p in (*function.args.posonlyargs, *function.args.args)]
                parameter = positional[parameter] if parameter < len(positional) else None
            elif parameter not in {p.arg for p in (*function.args.args, *function.args.kwonlyargs)}:
                parameter = None
            if parameter is not None and found.get((id(function), parameter)) != told.UPDATE:
                found[(id(function), parameter)] = kind
        if found:
            functions = list(semantic.nodes_of(*FUNCTIONS))
            for _ in range(SCALER_PASSES):
                before = len(found)
                for function in functions:
                    for parameter, values in bound_arguments(function, semantic).items():
                        if (id(function), parameter) in found:
                            continue
                        for value in values:
                            caller = enclosing_function(value) if isinstance(value, ast.Name) else None
                            kind = found.get((id(caller), value.id)) if caller is not None else None  # type: ignore[union-attr]
                            if kind is not None:
                                found[(id(function), parameter)] = kind
                                break
                if len(found) == before:
                    break
        semantic.__dict__["_xlalint_importer_bound"] = found
    return found


def importer_bound_kind(call: ast.Call, semantic: Semantic) -> str | None:
    """What ``call`` runs when it calls a parameter its importers bind to a step
    callable (``importer_bound_parameters``), else None."""
    if not semantic.told or not isinstance(call.func, ast.Name):
        return None
    bound = importer_bound_parameters(semantic)
    function = enclosing_function(call) if bound else None
    return bound.get((id(function), call.func.id)) if function is not None else None


def _holds_loss_scaler(value: ast.expr, names: frozenset[str], pairs: set[tuple[int, str]], semantic: Semantic) -> bool:
    """A value passed for a parameter is a library loss scaler: built there, a name
    assigned one, a parameter of the caller already bound to one."""
    if isinstance(value, ast.Call):
        return semantic.call_name(value) in LOSS_SCALERS
    if dotted_name(value) in names:
        return True
    caller = enclosing_function(value) if isinstance(value, ast.Name) else None
    return caller is not None and (id(caller), value.id) in pairs  # type: ignore[attr-defined]


def is_loss_scaler_call(call: ast.Call, semantic: Semantic) -> bool:
    """``loss_scaler(loss, optimizer, ...)``: a call of a library loss scaler (timm's
    ``NativeScaler``), which runs the backward and the optimizer step; also through a
    parameter the calls of its function bind to one (``loss_scaler_parameters``), or
    that the module's importers bind to one (``importer_bound_parameters``)."""
    if not call.args:
        return False
    name = dotted_name(call.func)
    if name is not None and name in loss_scaler_names(semantic):
        return True
    if isinstance(call.func, ast.Name) and loss_scaler_parameters(semantic):
        function = enclosing_function(call)
        if function is not None and (id(function), call.func.id) in loss_scaler_parameters(semantic):
            return True
    # A parameter an importer binds to one, or to its own callable that runs the
    # backward and steps the optimizer: the same whole update, seen from this module.
    return importer_bound_kind(call, semantic) == told.UPDATE
