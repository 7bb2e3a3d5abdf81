"""The step analysis (docs/rules.md, "Scope"): training loops, the step, sync points.

A *training loop* is a ``for``/``while`` loop whose body calls ``.backward()``,
directly or through same-module functions it calls (transitively). The *step loop*
is the innermost such loop, and *the step* is its body plus the bodies of the
same-module functions it calls (its *helpers*), minus functions passed to
``xm.add_step_closure`` and minus code under a guard that runs every N steps
(``if step % N == 0:``). Code after the loop is not in the step.

With gradient accumulation the step loop is a micro-step loop, and the optimizer steps
in the loop around it (``for it in ...: for micro in ...: loss.backward()`` then
``opt.step()``): that *optimizer-step loop* (the nearest loop around a step loop that
steps no optimizer, whose own body steps one, directly or through helpers) runs once
per optimizer step. Its body is part of the step for the rules that ask
``loop_running_every_step`` (XLA102's host reads); ``in_step``/``loop_of`` keep to the
micro-step loop, where XLA103's sync goes.

Everything is computed once per module, on first use (``Context.steps``), and shared
by the rules: XLA102 (host syncs in the step), XLA103 (a step without a sync point),
XLA106 (the AMP/clip order in the step), and others.

The analysis is flow-insensitive and stays within one file, like the rest of the
semantic layer: a name is "a tensor" if the step assigns it a tensor anywhere, a
name is "a device loader" if it is assigned one anywhere in its scope.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cached_property

from xlalint.linter.semantic import Semantic, ancestors, dotted_name, keyword, method_name, parent, string_value
from xlalint.linter.values import (
    FUNCTIONS,
    Function,
    assigned_values,
    call_sites,
    enclosing,
    enclosing_scopes,
    is_self_attr,
    parameter_names,
    self_and_ancestors,
    walk_scope,
)

Loop = ast.For | ast.AsyncFor | ast.While
_LOOPS = (ast.For, ast.AsyncFor, ast.While)

# --- names of the APIs the analysis knows ----------------------------------------------

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
OPTIMIZER_STEP = frozenset({f"{XM}.optimizer_step"})
OPTIMIZER_MODULES = ("torch.optim.", "torch_xla.amp.syncfree.")
STEP_CONTEXT = frozenset({"torch_xla.step", "torch_xla.torch_xla.step"})
COMPILE = frozenset({"torch_xla.compile", "torch_xla.torch_xla.compile"})
MP_DEVICE_LOADER = frozenset({f"{PL}.MpDeviceLoader"})
PARALLEL_LOADER = frozenset({f"{PL}.ParallelLoader"})
AUTOGRAD_BACKWARD = frozenset({"torch.autograd.backward"})
# Wrappers that iterate what they wrap lazily: iterating them iterates the loader.
ITERATOR_WRAPPERS = frozenset({"enumerate", "iter", "zip", "tqdm", "trange", "islice", "chain", "cycle"})

# torch functions that do not return a tensor (or return one that lives on the host).
_NON_TENSOR_TORCH = (
    "torch.device",
    "torch.cuda.",
    "torch.distributed.",
    "torch.utils.",
    "torch.optim.",
    "torch.backends.",
    "torch.jit.",
    "torch.compile",
    "torch.no_grad",
    "torch.enable_grad",
    "torch.inference_mode",
    "torch.set_grad_enabled",
    "torch.autocast",
    "torch.amp.",
    "torch.manual_seed",
    "torch.set_",
    "torch.get_",
    "torch.is_",
    "torch.save",
    "torch.load",
    "torch.Size",
    "torch.autograd.backward",
    "torch.nn.",  # modules; torch.nn.functional is allowed below
)
# torch.nn.utils functions that return a tensor (the total gradient norm).
_TENSOR_TORCH_NN = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.get_total_norm",
        "torch.nn.utils.clip_grad.get_total_norm",
    }
)
_TENSOR_XLA = frozenset({f"{XM}.all_reduce", f"{XM}.all_gather", f"{XM}.reduce_scatter", f"{XM}.all_to_all"})
# Methods that read a tensor's value on the host.
HOST_FETCH_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
# Tensor methods/attributes whose result is metadata, not a tensor.
_NON_TENSOR_METHODS = frozenset(
    {
        "size",
        "dim",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "is_contiguous",
        "is_floating_point",
        "get_device",
        "data_ptr",
        "backward",
        "zero_grad",
        "step",
        "parameters",
        "named_parameters",
        "state_dict",
        "keys",
        "items",
        "register_hook",
        "__len__",
    }
)
_NON_TENSOR_ATTRS = frozenset(
    {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "layout", "names", "is_cuda"}
)
# Methods that return the module they are called on.
_MODULE_METHODS = frozenset({"to", "cuda", "train", "eval", "half", "float", "bfloat16", "double", "requires_grad_"})
# Methods that only modules (not tensors) have: their receiver is a module.
_MODULE_ONLY_METHODS = frozenset(
    {"parameters", "named_parameters", "train", "eval", "modules", "named_modules", "zero_grad"}
)
# Conventional names of models and loss modules (the last component of a dotted name).
_MODULE_NAMES = frozenset(
    {
        "model",
        "net",
        "network",
        "module",
        "criterion",
        "loss_fn",
        "loss_fct",
        "loss_func",
        "lossfn",
        "ddp_model",
        "encoder",
        "decoder",
        "classifier",
    }
)
_NOT_MODULES = ("Tokenizer", "Processor", "Config", "FeatureExtractor", "Dataset", "Collator", "Optim", "Scheduler")


# --- module functions ------------------------------------------------------------------


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
    if semantic.call_name(call) in OPTIMIZER_STEP:
        return True
    if method_name(call) != "step":
        return False
    receiver = dotted_name(call.func.value) or ""  # type: ignore[attr-defined]
    last = receiver.rsplit(".", 1)[-1].lower()
    if "scaler" in last:
        return bool(call.args)
    if receiver in optimizers:
        return True
    return "opt" in last and "sched" not in last and not last.startswith("option")


def every_n_steps_guard(test: ast.expr) -> bool:
    """A test that holds once every N steps: ``step % N == 0``, ``(i + 1) % k == 0``,
    ``not step % N``, also combined with ``and`` (``... and xm.is_master_ordinal()``)
    or with ``or`` and equality tests (``... or step == len(loader) - 1``)."""
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And):
            return any(every_n_steps_guard(v) for v in test.values)
        return any(every_n_steps_guard(v) for v in test.values) and all(
            every_n_steps_guard(v) or _is_equality(v) for v in test.values
        )
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _is_modulo(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        return _is_modulo(test.left) or _is_modulo(test.comparators[0])
    return False


def _is_modulo(node: ast.expr) -> bool:
    """``x % N`` as arithmetic (not string formatting), N not the literal 1."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)):
        return False
    if isinstance(node.left, (ast.Constant, ast.JoinedStr)) and not isinstance(getattr(node.left, "value", 0), int):
        return False
    return not (isinstance(node.right, ast.Constant) and node.right.value in (0, 1))


def _is_equality(node: ast.expr) -> bool:
    return isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops)


def is_step_closure(node: ast.AST, semantic: Semantic) -> bool:
    """``node`` is inside a function or lambda passed to ``xm.add_step_closure``
    (which runs it after the next sync, when tensors have their values)."""
    return any(_is_closure_function(anc, semantic) for anc in self_and_ancestors(node))


def _is_closure_function(node: ast.AST, semantic: Semantic) -> bool:
    if isinstance(node, ast.Lambda):
        call = parent(node)
        if isinstance(call, ast.keyword):  # add_step_closure(closure=lambda: ...)
            call = parent(call)
        return isinstance(call, ast.Call) and _closure_argument(call, semantic) is node
    if isinstance(node, FUNCTIONS):
        return node.name in _closure_names(semantic)
    return False


def _closure_argument(call: ast.Call, semantic: Semantic) -> ast.expr | None:
    """The function argument of an ``xm.add_step_closure(fn, args=...)`` call."""
    if semantic.call_name(call) not in ADD_STEP_CLOSURE:
        return None
    if call.args:
        return call.args[0]
    kw = keyword(call, "closure")
    return kw.value if kw else None


def _closure_names(semantic: Semantic) -> frozenset[str]:
    cached = getattr(semantic, "_xlalint_closure_names", None)
    if cached is None:
        names = set()
        for call in semantic.calls:
            fn = _closure_argument(call, semantic)
            # `functools.partial(fn, ...)` passes fn too.
            if isinstance(fn, ast.Call) and fn.args and (dotted_name(fn.func) or "").endswith("partial"):
                fn = fn.args[0]
            if isinstance(fn, ast.Name):
                names.add(fn.id)
            elif isinstance(fn, ast.Attribute):
                names.add(fn.attr)
        cached = frozenset(names)
        semantic._xlalint_closure_names = cached  # type: ignore[attr-defined]
    return cached


def is_device_loader(expr: ast.AST | None, semantic: Semantic) -> bool:
    """``expr`` is (or iterates) a torch_xla device loader: ``pl.MpDeviceLoader(...)``,
    ``pl.ParallelLoader(...).per_device_loader(...)``, a variable or ``self.<attr>``
    assigned one, ``iter(...)``/``enumerate(...)``/``tqdm(...)`` of one, or a
    parameter that every call site in the module fills with one."""
    return _DeviceLoaders(semantic).check(expr)


class _DeviceLoaders:
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


def mutually_exclusive(a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` are in different branches of one ``if`` (``if use_amp: ... else: ...``)
    or conditional expression: they never both run in one pass."""
    chain_a = list(self_and_ancestors(a))
    chain_b = set(map(id, self_and_ancestors(b)))
    for i, anc in enumerate(chain_a):
        if id(anc) not in chain_b:
            continue
        # `anc` is the lowest common ancestor; which fields lead down to a and b?
        child_a = chain_a[i - 1] if i else None
        child_b = next((n for n in self_and_ancestors(b) if parent(n) is anc), None)
        if child_a is None or child_b is None:
            return False
        if isinstance(anc, ast.If):
            return (
                (child_a in anc.body) != (child_b in anc.body) and child_a is not anc.test and child_b is not anc.test
            )
        if isinstance(anc, ast.IfExp):
            return {id(child_a), id(child_b)} == {id(anc.body), id(anc.orelse)}
        return False
    return False


# --- the analysis ----------------------------------------------------------------------


def _is_backward_call(call: ast.Call, semantic: Semantic) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``torch.autograd.backward(...)``."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "backward":
        return True
    return semantic.call_name(call) in AUTOGRAD_BACKWARD


class StepAnalysis:
    """The step loops of a module and the facts rules ask about them."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        self.tree = semantic.tree
        self._reaches_backward: dict[int, bool] = {}
        self._training: dict[int, bool] = {}
        self._resolved: dict[int, Function | None] = {}
        self._locals: dict[int, dict[str, Function]] = {}
        self._loaders = _DeviceLoaders(self.semantic)
        # Most modules call no backward at all: then no loop trains, and no loop or
        # function needs walking to find out.
        self._any_backward = any(_is_backward_call(call, self.semantic) for call in self.semantic.calls)
        all_loops = sorted(self.semantic.nodes_of(*_LOOPS), key=lambda n: (n.lineno, n.col_offset))
        training = [loop for loop in all_loops if self.is_training_loop(loop)]
        step_loops = [loop for loop in training if not self._contains_training_loop(loop)]
        step_loops.sort(key=lambda n: (n.lineno, n.col_offset))
        self.loops: list[StepLoop] = [StepLoop(self, loop) for loop in step_loops]
        self._by_node = {id(loop.node): loop for loop in self.loops}
        self._by_helper: dict[int, list[StepLoop]] = {}
        for loop in self.loops:
            for helper in loop.helpers:
                self._by_helper.setdefault(id(helper), []).append(loop)
        # The optimizer-step loops around micro-step loops (gradient accumulation).
        self._optimizer_loops: dict[int, StepLoop] = {}
        self._by_optimizer_helper: dict[int, list[StepLoop]] = {}
        for loop in self.loops:
            outer = self._optimizer_loop_node(loop)
            if outer is None:
                continue
            if id(outer) not in self._optimizer_loops:
                self._optimizer_loops[id(outer)] = StepLoop(self, outer)
                for helper in self._optimizer_loops[id(outer)].helpers:
                    self._by_optimizer_helper.setdefault(id(helper), []).append(self._optimizer_loops[id(outer)])
            loop.optimizer_loop = self._optimizer_loops[id(outer)]
            loop.optimizer_loop.micro_step_loops.append(loop)

    # -- queries ------------------------------------------------------------------
    def loop_of(self, node: ast.AST) -> StepLoop | None:
        """The step loop whose step holds ``node`` (its body, a helper it calls, also
        under an every-N-steps guard, not in a step closure), else None."""
        found = self._locate(node)
        return found[0] if found else None

    def in_step(self, node: ast.AST) -> bool:
        """``node`` runs on every step of some step loop: in its step, not in a step
        closure, not under an every-N-steps guard, not after the loop."""
        found = self._locate(node)
        return found is not None and found[1] is None

    def loop_running_every_step(self, node: ast.AST) -> StepLoop | None:
        """The loop whose step runs ``node`` on every optimizer step, not under an
        every-N-steps guard: its step loop (``in_step``), else the optimizer-step loop
        around a micro-step loop whose own body (or a helper it calls) holds ``node``
        (``print(loss_accum.item())`` after the micro-steps)."""
        found = self._locate(node) or self._locate(node, self._optimizer_loops, self._by_optimizer_helper)
        return found[0] if found is not None and found[1] is None else None

    def _locate(
        self,
        node: ast.AST,
        by_node: dict[int, StepLoop] | None = None,
        by_helper: dict[int, list[StepLoop]] | None = None,
    ) -> tuple[StepLoop, ast.If | None] | None:
        """(the step loop, the every-N guard the node is under or None); among the
        optimizer-step loops when given ``by_node``/``by_helper``."""
        by_node = self._by_node if by_node is None else by_node
        by_helper = self._by_helper if by_helper is None else by_helper
        guard: ast.If | None = None
        child: ast.AST = node
        for anc in self_and_ancestors(parent(node)):
            if isinstance(anc, ast.Lambda) and _is_closure_function(anc, self.semantic):
                return None
            if isinstance(anc, ast.ClassDef):
                return None
            if isinstance(anc, ast.If) and child in anc.body and guard is None and every_n_steps_guard(anc.test):
                guard = anc
            if isinstance(anc, _LOOPS) and id(anc) in by_node:
                loop = by_node[id(anc)]
                if child in anc.body or (isinstance(anc, ast.While) and child is anc.test):
                    return loop, guard
                return None
            if isinstance(anc, FUNCTIONS):
                if _is_closure_function(anc, self.semantic):
                    return None
                loops = by_helper.get(id(anc))
                if not loops:
                    return None
                loop = loops[0]
                return loop, guard or loop._reach_guard.get(id(anc))
            child = anc
        return None

    # -- building -----------------------------------------------------------------
    def _optimizer_loop_node(self, loop: StepLoop) -> Loop | None:
        """The optimizer-step loop around a micro-step loop: the nearest loop around it
        in its function, when the micro-steps step no optimizer and that loop's own body
        (outside its step loops) does."""
        if self._steps_optimizer(loop.node.body, set(), within=loop.node):
            return None
        outer = next((a for a in ancestors(loop.node) if isinstance(a, (*_LOOPS, *FUNCTIONS, ast.ClassDef))), None)
        if not isinstance(outer, _LOOPS) or id(outer) in self._by_node:
            return None
        return outer if self._steps_optimizer(outer.body, set()) else None

    def _steps_optimizer(self, statements: list[ast.stmt], visiting: set[int], within: ast.AST | None = None) -> bool:
        """These statements step an optimizer, directly or through same-module functions
        they call; not in step loops other than ``within``."""
        for call in self.region_calls(statements):
            if any(id(anc) in self._by_node and anc is not within for anc in ancestors(call)):
                continue
            if is_optimizer_step(call, self.semantic, self._optimizer_names):
                return True
            func = self.resolve(call)
            if func is not None and id(func) not in visiting:
                visiting.add(id(func))
                if self._steps_optimizer(func.body, visiting):
                    return True
        return False

    @cached_property
    def _optimizer_names(self) -> frozenset[str]:
        """Dotted names assigned an optimizer built from ``torch.optim``/syncfree classes."""
        names: set[str] = set()
        for node in self.semantic.nodes_of(ast.Assign):
            qualified = self.semantic.call_name(node.value) if isinstance(node.value, ast.Call) else None
            if qualified and qualified.startswith(OPTIMIZER_MODULES) and "lr_scheduler" not in qualified:
                names.update(n for t in node.targets if (n := dotted_name(t)))
        return frozenset(names)

    def is_training_loop(self, loop: Loop) -> bool:
        """The loop body calls ``.backward()``, directly or through functions it calls."""
        if not self._any_backward:
            return False
        key = id(loop)
        if key not in self._training:
            self._training[key] = False
            self._training[key] = self._region_reaches_backward(loop.body, set())
        return self._training[key]

    def reaches_backward(self, statements: list[ast.stmt]) -> bool:
        """These statements call ``.backward()``, directly or through functions they call."""
        return self._any_backward and self._region_reaches_backward(statements, set())

    def _region_reaches_backward(self, statements: list[ast.stmt], visiting: set[int]) -> bool:
        for call in self.region_calls(statements):
            if _is_backward_call(call, self.semantic):
                return True
        for call in self.region_calls(statements):
            func = self.resolve(call)
            if func is not None and self._function_reaches_backward(func, visiting):
                return True
        return False

    def _function_reaches_backward(self, func: Function, visiting: set[int]) -> bool:
        key = id(func)
        if key in self._reaches_backward:
            return self._reaches_backward[key]
        if key in visiting:
            return False
        visiting.add(key)
        result = self._region_reaches_backward(func.body, visiting)
        visiting.discard(key)
        self._reaches_backward[key] = result
        return result

    def _contains_training_loop(self, loop: Loop) -> bool:
        """A training loop nested in ``loop``'s body or in a function it calls."""
        seen: set[int] = set()
        pending: list[list[ast.stmt]] = [loop.body]
        while pending:
            statements = pending.pop()
            for stmt in statements:
                for node in _walk_region(stmt, self.semantic, include_self=True):
                    if isinstance(node, _LOOPS) and node is not loop and self.is_training_loop(node):
                        return True
            for call in self.region_calls(statements):
                func = self.resolve(call)
                if func is not None and id(func) not in seen and not _contains(func, loop):
                    seen.add(id(func))
                    pending.append(func.body)
        return False

    def region_calls(self, statements: Iterable[ast.stmt]) -> Iterator[ast.Call]:
        """The calls that run when ``statements`` run (not in nested definitions or step closures)."""
        for stmt in statements:
            for node in _walk_region(stmt, self.semantic, include_self=True):
                if isinstance(node, ast.Call):
                    yield node

    def resolve(self, call: ast.Call) -> Function | None:
        """The same-module function a call calls: ``f(...)`` (a module-level function,
        or one defined in an enclosing function), ``self.m(...)`` (a method of the
        enclosing class or of a same-module base class)."""
        key = id(call)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(call)
        return self._resolved[key]

    def _resolve(self, call: ast.Call) -> Function | None:
        func = call.func
        if isinstance(func, ast.Name):
            return self._function_named(func.id, call)
        closure = self.closure_passed(call)
        if closure is not None:
            return closure
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            cls = enclosing(call, ast.ClassDef)
            seen: set[int] = set()
            while cls is not None and id(cls) not in seen:
                seen.add(id(cls))
                for stmt in cls.body:
                    if isinstance(stmt, FUNCTIONS) and stmt.name == func.attr:
                        return stmt
                cls = next((self._module_class(b) for b in cls.bases if self._module_class(b)), None)
        return None

    def _function_named(self, name: str, at: ast.AST) -> Function | None:
        """The same-module function ``name`` means at ``at``: one defined in an
        enclosing function, else a module-level one."""
        for scope in enclosing_scopes(at):
            if isinstance(scope, ast.Module):
                # A def under a module-level `for`/`if`/`with` binds a module name too.
                return self.semantic.module_functions.get(name) or self._local_functions(scope).get(name)
            found = self._local_functions(scope).get(name)
            if found is not None:
                return found
        return None

    def closure_passed(self, call: ast.Call) -> Function | None:
        """The same-module ``def`` an optimizer step runs as its closure (see
        ``optimizer_closure``), when the closure is passed by name."""
        passed = optimizer_closure(call, self.semantic)
        return self._function_named(passed.id, call) if isinstance(passed, ast.Name) else None

    def _local_functions(self, scope: ast.AST) -> dict[str, Function]:
        """The functions defined in ``scope``'s own body (not in nested functions)."""
        key = id(scope)
        if key not in self._locals:
            found: dict[str, Function] = {}
            for node in walk_scope(scope, shallow=True):
                if isinstance(node, FUNCTIONS):
                    found.setdefault(node.name, node)
            self._locals[key] = found
        return self._locals[key]

    def _module_class(self, base: ast.expr) -> ast.ClassDef | None:
        if isinstance(base, ast.Name):
            for stmt in self.tree.body:
                if isinstance(stmt, ast.ClassDef) and stmt.name == base.id:
                    return stmt
        return None

    def is_device_loader(self, expr: ast.AST | None) -> bool:
        return self._loaders.check(expr)

    # -- module-wide facts ----------------------------------------------------------
    @cached_property
    def _compiled(self) -> tuple[frozenset[str], frozenset[str]]:
        """(names and ``self.<attr>`` names bound to ``torch_xla.compile`` results,
        names of the functions that ``torch_xla.compile`` traces)."""
        callables: set[str] = set()
        traced: set[str] = set()
        for node in self.semantic.nodes_of(*FUNCTIONS, ast.Assign):
            if isinstance(node, FUNCTIONS):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if self.semantic.qualified_name(target) in COMPILE:
                        callables.add(node.name)
                        traced.add(node.name)
            elif isinstance(node, ast.Assign) and self.semantic.call_name(node.value) in COMPILE:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        callables.add(target.id)
                    elif isinstance(target, ast.Attribute):
                        callables.add(target.attr)
                wrapped = node.value.args[0] if node.value.args else None  # type: ignore[attr-defined]
                if isinstance(wrapped, (ast.Name, ast.Attribute)):
                    traced.add(wrapped.id if isinstance(wrapped, ast.Name) else wrapped.attr)
        return frozenset(callables), frozenset(traced)

    def is_compiled_function(self, func: Function) -> bool:
        """``func`` is traced by ``torch_xla.compile`` (decorated, or wrapped by name)."""
        return func.name in self._compiled[1]

    def is_sync_call(self, call: ast.Call) -> bool:
        """``torch_xla.sync()``, ``xm.mark_step()``, ``xm.optimizer_step(..., barrier=True)``,
        ``next()`` on a device loader, a call of a ``torch_xla.compile``d function."""
        name = self.semantic.call_name(call)
        if name in SYNC_CALLS:
            return True
        if name in OPTIMIZER_STEP:
            barrier = keyword(call, "barrier")
            value = barrier.value if barrier else (call.args[2] if len(call.args) > 2 else None)
            return value is not None and not (isinstance(value, ast.Constant) and not value.value)
        if isinstance(call.func, ast.Name) and call.func.id == "next" and call.args and not _shadowed("next", self):
            return self.is_device_loader(call.args[0])
        if isinstance(call.func, ast.Call) and self.semantic.call_name(call.func) in COMPILE:
            return True
        callee = call.func.id if isinstance(call.func, ast.Name) else None
        if (
            isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self"
        ):
            callee = call.func.attr
        return callee is not None and callee in self._compiled[0]

    def is_step_context(self, with_item: ast.withitem) -> bool:
        return self.semantic.call_name(with_item.context_expr) in STEP_CONTEXT

    @cached_property
    def module_names(self) -> frozenset[str]:
        """Dotted names that hold a ``nn.Module`` (a model or a loss module): assigned
        a torch.nn/transformers model or a same-module ``nn.Module`` subclass, receivers
        of ``.parameters()``/``.train()``/``.eval()``, and the conventional names."""
        semantic = self.semantic
        classes = _module_classes(self.tree, semantic)
        names: set[str] = set()

        def is_module_expr(value: ast.AST, depth: int = 0) -> bool:
            if depth > 5:
                return False
            if isinstance(value, (ast.Name, ast.Attribute)):
                dotted = dotted_name(value)
                return dotted is not None and dotted in names
            if not isinstance(value, ast.Call):
                return False
            qualified = semantic.call_name(value) or ""
            if qualified.startswith(("torch.nn.", "torch_xla.distributed.fsdp.")) and not qualified.startswith(
                ("torch.nn.functional.", "torch.nn.utils.", "torch.nn.init.")
            ):
                return True
            if qualified.startswith("transformers.") and not any(word in qualified for word in _NOT_MODULES):
                return "Model" in qualified or "For" in qualified
            if isinstance(value.func, ast.Name) and value.func.id in classes:
                return True
            attr = method_name(value)
            if attr == "from_pretrained":
                owner = dotted_name(value.func.value) or ""  # type: ignore[union-attr]
                qualified_owner = semantic.qualified_name(value.func.value) or owner  # type: ignore[union-attr]
                return "Model" in qualified_owner and not any(w in qualified_owner for w in _NOT_MODULES)
            if attr in _MODULE_METHODS:
                return is_module_expr(value.func.value, depth + 1)  # type: ignore[union-attr]
            return False

        for call in semantic.calls:
            if method_name(call) in _MODULE_ONLY_METHODS and method_name(call) != "zero_grad":
                dotted = dotted_name(call.func.value)  # type: ignore[union-attr]
                if dotted:
                    names.add(dotted)
        assignments = semantic.nodes_of(ast.Assign, ast.AnnAssign)
        for _ in range(3):
            before = len(names)
            for node in assignments:
                if (
                    isinstance(node, (ast.Assign, ast.AnnAssign))
                    and node.value is not None
                    and is_module_expr(node.value)
                ):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        dotted = dotted_name(target)
                        if dotted:
                            names.add(dotted)
            if len(names) == before:
                break
        return frozenset(names)

    def is_module(self, expr: ast.AST) -> bool:
        dotted = dotted_name(expr)
        if dotted is None:
            return False
        return dotted in self.module_names or dotted.rsplit(".", 1)[-1] in _MODULE_NAMES


def _module_classes(tree: ast.Module, semantic: Semantic) -> set[str]:
    """Classes of this module that subclass ``torch.nn.Module`` (directly or through
    another such class)."""
    classes: set[str] = set()
    definitions = semantic.nodes_of(ast.ClassDef)
    for _ in range(3):
        for node in definitions:
            if node.name not in classes:
                for base in node.bases:
                    qualified = semantic.qualified_name(base) or ""
                    local = isinstance(base, ast.Name) and base.id in classes
                    hf_model = qualified.startswith("transformers.") and "PreTrainedModel" in qualified
                    if qualified.startswith("torch.nn.") or local or hf_model:
                        classes.add(node.name)
    return classes


def _shadowed(name: str, analysis: StepAnalysis) -> bool:
    return name in analysis.semantic.imports.bindings or name in analysis.semantic.module_functions


def _contains(outer: ast.AST, node: ast.AST) -> bool:
    return any(anc is outer for anc in self_and_ancestors(node))


def _walk_region(stmt: ast.AST, semantic: Semantic, include_self: bool = False) -> Iterator[ast.AST]:
    """The nodes that run when ``stmt`` runs: not the bodies of nested functions and
    classes, and not lambdas passed to ``xm.add_step_closure`` (a lambda's body is
    otherwise assumed to run: ``sorted(..., key=lambda t: ...)``)."""
    stack: list[ast.AST] = [stmt] if include_self else list(ast.iter_child_nodes(stmt))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            # Decorators run where the definition stands; the body does not.
            stack.extend(reversed(node.decorator_list))
            continue
        if isinstance(node, ast.Lambda) and _is_closure_function(node, semantic):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


class StepLoop:
    """One step loop: the innermost training loop, its helpers, its sync points."""

    def __init__(self, analysis: StepAnalysis, node: Loop):
        self.analysis = analysis
        self.node = node
        # helper id -> the every-N guard through which it is reached (None: on every step).
        self._reach_guard: dict[int, ast.If | None] = {}
        self.helpers: list[Function] = self._find_helpers()
        # A micro-step loop: the optimizer-step loop around it. That loop: its micro-step loops.
        self.optimizer_loop: StepLoop | None = None
        self.micro_step_loops: list[StepLoop] = []

    def __repr__(self) -> str:
        return f"StepLoop(line {self.node.lineno})"

    # -- the step ---------------------------------------------------------------------
    def _find_helpers(self) -> list[Function]:
        analysis = self.analysis
        helpers: list[Function] = []
        pending: list[tuple[list[ast.stmt], ast.If | None, ast.AST]] = [(self.node.body, None, self.node)]
        while pending:
            statements, reach_guard, owner = pending.pop(0)
            for call in analysis.region_calls(statements):
                func = analysis.resolve(call)
                if func is None or _contains(func, self.node) or _is_closure_function(func, analysis.semantic):
                    continue
                guard = reach_guard or _guard_between(call, owner)
                key = id(func)
                if key in self._reach_guard:
                    if self._reach_guard[key] is not None and guard is None:
                        # Reached on every step after all: revisit with no guard.
                        self._reach_guard[key] = None
                        pending.append((func.body, None, func))
                    continue
                self._reach_guard[key] = guard
                helpers.append(func)
                pending.append((func.body, guard, func))
        helpers.sort(key=lambda f: (f.lineno, f.col_offset))
        return helpers

    def step_statements(self) -> list[ast.stmt]:
        """The top-level statements of the step: the loop body, then the helpers' bodies."""
        statements = list(self.node.body)
        for helper in self.helpers:
            statements.extend(helper.body)
        return statements

    def contains(self, node: ast.AST, include_guarded: bool = False) -> bool:
        """``node`` is in this loop's step: not in a step closure, not after the loop,
        and (unless ``include_guarded``) not under an every-N-steps guard."""
        found = self._locate(node)
        if found is None:
            return False
        loop, guard = found
        if loop is not self and not (isinstance(node, ast.AST) and self._holds(node)):
            return False
        return include_guarded or guard is None

    def _holds(self, node: ast.AST) -> bool:
        """``node`` is in a helper this loop shares with another step loop."""
        return any(isinstance(anc, FUNCTIONS) and id(anc) in self._reach_guard for anc in self_and_ancestors(node))

    def guard_of(self, node: ast.AST) -> ast.If | None:
        """The every-N-steps guard ``node`` is under (in the loop body, in a helper, or at
        the call that reaches the helper), if any."""
        found = self._locate(node)
        return found[1] if found else None

    def _locate(self, node: ast.AST) -> tuple[StepLoop, ast.If | None] | None:
        analysis = self.analysis
        if self.micro_step_loops:
            return analysis._locate(node, analysis._optimizer_loops, analysis._by_optimizer_helper)
        return analysis._locate(node)

    def _regions(self) -> Iterator[tuple[ast.AST, list[ast.stmt]]]:
        yield self.node, self.node.body
        for helper in self.helpers:
            yield helper, helper.body

    def nodes(self) -> Iterator[ast.AST]:
        """Every node that runs in the step (also under guards; not in step closures)."""
        if isinstance(self.node, ast.While):
            yield from _walk_region(self.node.test, self.analysis.semantic, include_self=True)
        for _, statements in self._regions():
            for stmt in statements:
                yield from _walk_region(stmt, self.analysis.semantic, include_self=True)

    # -- sync points ------------------------------------------------------------------
    def iterates_device_loader(self) -> bool:
        return isinstance(self.node, (ast.For, ast.AsyncFor)) and self.analysis.is_device_loader(self.node.iter)

    def sync_points(self) -> list[ast.AST]:
        """The sync points of the step (also those under a guard): the loop itself when
        it iterates a device loader, sync calls, ``torch_xla.step()`` contexts."""
        points: list[ast.AST] = []
        if self.iterates_device_loader():
            points.append(self.node)
        for node in self.nodes():
            if isinstance(node, ast.Call) and self.analysis.is_sync_call(node):
                points.append(node)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                points.extend(item.context_expr for item in node.items if self.analysis.is_step_context(item))
        return points

    def syncs_every_iteration(self) -> bool:
        """Some sync point runs on every iteration (not only under an every-N guard
        such as gradient accumulation's ``if (i + 1) % k == 0:``)."""
        return any(point is self.node or self.guard_of(point) is None for point in self.sync_points())

    # -- tensors ------------------------------------------------------------------------
    @cached_property
    def _tensors(self) -> tuple[frozenset[str], frozenset[int]]:
        """(dotted names holding tensors produced in the step, ids of helpers returning one)."""
        analysis = self.analysis
        names: set[str] = set()
        returns: set[int] = set()
        nodes = list(self.nodes())
        # Seeds: what `.backward()` is called on, and batches from a device loader.
        for node in nodes:
            if isinstance(node, ast.Call) and _is_backward_call(node, analysis.semantic):
                names.update(_value_names(_backward_root(node)))
        if self.iterates_device_loader():
            names.update(_batch_names(self.node.target, self.node.iter))  # type: ignore[union-attr]
        helper_by_id = {id(h): h for h in self.helpers}
        for _ in range(8):
            before = (len(names), len(returns))
            state = (frozenset(names), frozenset(returns))

            def is_tensor(e: ast.AST, state=state) -> bool:
                return self._is_tensor(e, state)

            for node in nodes:
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        _bind(target, node.value, is_tensor, names)
                elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    _bind(node.target, node.value, is_tensor, names)
                elif isinstance(node, ast.AugAssign) and self._is_tensor(node.value, state):
                    dotted = dotted_name(node.target)
                    if dotted:
                        names.add(dotted)
                elif isinstance(node, (ast.For, ast.AsyncFor)) and self._is_tensor(node.iter, state):
                    names.update(_target_names(node.target))
                elif isinstance(node, ast.Return) and node.value is not None and self._is_tensor(node.value, state):
                    func = enclosing(node, FUNCTIONS)
                    if func is not None and id(func) in helper_by_id:
                        returns.add(id(func))
                elif isinstance(node, ast.Call):
                    # Tensor arguments make tensor parameters of the helper called.
                    func = analysis.resolve(node)
                    if func is not None and id(func) in helper_by_id:
                        _bind_arguments(func, node, is_tensor, names)
            if (len(names), len(returns)) == before:
                break
        return frozenset(names), frozenset(returns)

    def is_tensor(self, expr: ast.AST | None) -> bool:
        """``expr`` is a tensor produced in the step: the loss ``.backward()`` is called
        on, a model's output, a ``torch.*`` result, a name assigned one, an attribute or
        subscript of one (``outputs.loss``, ``logits[0]``), arithmetic on one. Values
        already on the host (``.item()``, ``.cpu()``, ...) are not."""
        return self._is_tensor(expr, self._tensors)

    def _is_tensor(self, expr: ast.AST | None, state: tuple[frozenset[str], frozenset[int]], depth: int = 0) -> bool:
        if expr is None or depth > 40:
            return False
        names = state[0]
        analysis = self.analysis

        def rec(e: ast.AST | None) -> bool:
            return self._is_tensor(e, state, depth + 1)

        if isinstance(expr, ast.Name):
            return expr.id in names
        if isinstance(expr, ast.Attribute):
            if expr.attr in _NON_TENSOR_ATTRS:
                return False
            dotted = dotted_name(expr)
            if dotted is not None and dotted in names:
                return True
            return not analysis.is_module(expr.value) and rec(expr.value)
        if isinstance(expr, ast.Subscript):
            return rec(expr.value)
        if isinstance(expr, ast.Starred):
            return rec(expr.value)
        if isinstance(expr, ast.NamedExpr):
            return rec(expr.value)
        if isinstance(expr, ast.BinOp):
            if isinstance(expr.op, ast.Mod) and isinstance(expr.left, (ast.Constant, ast.JoinedStr)):
                return False  # "%s" % t is a string
            return rec(expr.left) or rec(expr.right)
        if isinstance(expr, ast.UnaryOp):
            return not isinstance(expr.op, ast.Not) and rec(expr.operand)
        if isinstance(expr, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in expr.ops):
                return False
            return any(rec(e) for e in (expr.left, *expr.comparators))
        if isinstance(expr, ast.IfExp):
            return rec(expr.body) or rec(expr.orelse)
        if isinstance(expr, ast.Dict):
            return any(rec(v) for v in expr.values)
        if isinstance(expr, ast.DictComp):
            return rec(expr.value) or any(rec(g.iter) for g in expr.generators)
        if isinstance(expr, ast.Call):
            return self._call_is_tensor(expr, state, rec)
        return False

    def _call_is_tensor(self, call: ast.Call, state, rec) -> bool:
        analysis = self.analysis
        _, returns = state
        attr = method_name(call)
        if attr is not None:
            receiver = call.func.value  # type: ignore[union-attr]
            if attr in HOST_FETCH_METHODS or attr in _NON_TENSOR_METHODS:
                return False
            if analysis.is_module(receiver):
                # `model.to(device)` is the model; `model.generate(...)`, `model.forward(...)` are outputs.
                return attr not in _MODULE_METHODS
            if rec(receiver):
                return True
            if attr in ("to", "cuda"):
                # `x.to(device)` puts something on the device (a batch, a BatchEncoding).
                return not any(string_value(a) == "cpu" for a in (*call.args, *(k.value for k in call.keywords)))
        qualified = analysis.semantic.call_name(call)
        if qualified is not None:
            if qualified in _TENSOR_XLA or qualified in _TENSOR_TORCH_NN:
                return True
            if qualified.startswith("torch.nn.functional."):
                return True
            return qualified.startswith("torch.") and not qualified.startswith(_NON_TENSOR_TORCH)
        if analysis.is_module(call.func):
            return True
        if isinstance(call.func, ast.Name) and call.func.id == "next" and call.args:
            return analysis.is_device_loader(call.args[0])
        func = analysis.resolve(call)
        return func is not None and id(func) in returns


def _backward_root(call: ast.Call) -> ast.AST:
    """What a backward call differentiates: ``loss`` in ``loss.backward()``,
    ``scaler.scale(loss).backward()``, ``torch.autograd.backward(loss)``,
    ``accelerator.backward(loss)`` (a function-style call: a plain name or attribute
    chain receiving the loss as its first argument)."""
    if not isinstance(call.func, ast.Attribute):
        return call.args[0] if call.args else call
    receiver = call.func.value
    if call.args and isinstance(receiver, (ast.Name, ast.Attribute)):
        # `x.backward(gradient)` is rare; `lib.backward(loss)` is the common case.
        return call.args[0]
    return receiver


def _value_names(expr: ast.AST) -> set[str]:
    """Dotted names whose values flow into ``expr`` (not the functions it calls)."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        dotted = dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if dotted is not None:
            found.add(dotted)
            continue
        if isinstance(node, ast.Call):
            stack.extend(node.args)
            stack.extend(k.value for k in node.keywords)
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            # `(loss / accumulation_steps).backward()`: the divisor is a normalizer,
            # usually a plain number; the tensor is the dividend.
            stack.append(node.left)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _target_names(target: ast.AST) -> set[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(t) for t in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    dotted = dotted_name(target)
    return {dotted} if dotted else set()


def _batch_names(target: ast.AST, iterable: ast.AST) -> set[str]:
    """The names a ``for`` loop binds to batches: ``batch`` in ``for i, batch in enumerate(dl)``."""
    if isinstance(iterable, ast.Call) and iterable.args:
        wrapper = (dotted_name(iterable.func) or "").rsplit(".", 1)[-1]
        if wrapper == "enumerate":
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                return _target_names(target.elts[1])
            return set()
        if wrapper in ("tqdm", "iter", "islice"):
            return _batch_names(target, iterable.args[0])
    return _target_names(target)


def _bind(target: ast.AST, value: ast.expr, is_tensor, names: set[str]) -> None:
    """Mark the names ``target`` binds as tensors when ``value`` is one (pairwise for
    ``a, b = x, y``; all of them for ``loss, logits = model(x)``)."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        for t, v in zip(target.elts, value.elts):
            _bind(t, v, is_tensor, names)
        return
    if is_tensor(value):
        names.update(_target_names(target))


def _bind_arguments(func: Function, call: ast.Call, is_tensor, names: set[str]) -> None:
    params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    for param, arg in zip(params, call.args):
        if isinstance(arg, ast.Starred):
            break
        if is_tensor(arg):
            names.add(param)
    known = parameter_names(func)
    for kw in call.keywords:
        if kw.arg in known and is_tensor(kw.value):
            names.add(kw.arg)


def _guard_between(node: ast.AST, owner: ast.AST) -> ast.If | None:
    """The innermost every-N-steps guard between ``node`` and ``owner`` (a loop or function)."""
    child = node
    for anc in self_and_ancestors(parent(node)):
        if anc is owner:
            return None
        if isinstance(anc, ast.If) and child in anc.body and every_n_steps_guard(anc.test):
            return anc
        child = anc
    return None
