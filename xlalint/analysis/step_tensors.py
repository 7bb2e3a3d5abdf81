"""The tensors of a step (``StepLoop.is_tensor``): which names hold tensors produced in
the step, flow-insensitively: seeded by what ``.backward()`` differentiates and the
batches of a device loader, then followed through assignments, loops, the arguments and
returns of the step's helpers. And which names hold ``nn.Module``s (their calls make
tensors; they are not tensors)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cached_property
from typing import Any, Protocol

from xlalint.analysis.reaching import reaching_values
from xlalint.analysis.semantic import Semantic, dotted_name, method_name, string_value
from xlalint.analysis.step_apis import XM, is_backward_call
from xlalint.analysis.values import FUNCTIONS, Function, enclosing, parameter_names, target_names

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


class Analysis(Protocol):
    """What the tensor flow asks the step analysis."""

    semantic: Semantic

    def resolve(self, call: ast.Call) -> Function | None: ...
    def is_module(self, expr: ast.AST) -> bool: ...
    def is_device_loader(self, expr: ast.AST | None) -> bool: ...


class Region(Protocol):
    """A step loop: its analysis, loop node, helpers and nodes."""

    analysis: Analysis
    node: ast.For | ast.AsyncFor | ast.While
    helpers: list[Function]

    def nodes(self) -> Iterator[ast.AST]: ...
    def iterates_device_loader(self) -> bool: ...


class StepTensors:
    """The tensors produced in one step loop's step."""

    def __init__(self, loop: Region):
        self.loop = loop

    @cached_property
    def _tensors(self) -> tuple[frozenset[str], frozenset[int]]:
        """(dotted names holding tensors produced in the step, ids of helpers returning one)."""
        analysis = self.loop.analysis
        names: set[str] = set()
        returns: set[int] = set()
        nodes = list(self.loop.nodes())
        # Seeds: what `.backward()` is called on, and batches from a device loader.
        hosts = host_names(analysis.semantic)
        for node in nodes:
            if isinstance(node, ast.Call) and is_backward_call(node, analysis.semantic):
                # `(args.r1 / 2 * r1_loss * args.d_reg_every).backward()`: the options are numbers.
                names.update(n for n in _value_names(_backward_root(node)) if n.split(".", 1)[0] not in hosts)
        if self.loop.iterates_device_loader():
            names.update(_batch_names(self.loop.node.target, self.loop.node.iter))  # type: ignore[union-attr]
        helper_by_id = {id(h): h for h in self.loop.helpers}
        # What can make a tensor, found once (each round asks again), in the order of
        # the nodes: (what, target or helper, value or call, the names it would bind).
        work: list[tuple[str, Any, Any, set[str]]] = []
        for node in nodes:
            if isinstance(node, ast.Assign):
                work.extend(("assign", t, node.value, target_names(t)) for t in node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                work.append(("assign", node.target, node.value, target_names(node.target)))
            elif isinstance(node, ast.AugAssign):
                dotted = dotted_name(node.target)
                if dotted:
                    work.append(("update", node.target, node.value, {dotted}))
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                work.append(("update", node.target, node.iter, target_names(node.target)))
            elif isinstance(node, ast.Return) and node.value is not None:
                func = enclosing(node, FUNCTIONS)
                if func is not None and id(func) in helper_by_id:
                    work.append(("return", func, node.value, set()))
            elif isinstance(node, ast.Call):
                func = analysis.resolve(node)
                if func is not None and id(func) in helper_by_id:
                    work.append(("call", func, node, set()))
        for _ in range(8):
            before = (len(names), len(returns))
            state = (frozenset(names), frozenset(returns))

            def is_tensor(e: ast.AST, state=state) -> bool:
                return self._is_tensor(e, state)

            for what, target, value, bound in work:
                if what == "call":
                    # Tensor arguments make tensor parameters of the helper called.
                    _bind_arguments(target, value, is_tensor, names)
                elif what == "return":
                    if id(target) not in returns and self._is_tensor(value, state):
                        returns.add(id(target))
                elif bound <= names:
                    continue  # all of them tensors already (names only grow): not asked again
                elif what == "assign":
                    _bind(target, value, is_tensor, names)
                elif self._is_tensor(value, state):
                    names.update(bound)
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
        analysis = self.loop.analysis

        def rec(e: ast.AST | None) -> bool:
            return self._is_tensor(e, state, depth + 1)

        if isinstance(expr, ast.Name):
            if expr.id not in names or expr.id in host_names(analysis.semantic):
                return False
            # `n = n.item()` on every path before this read: a number here.
            values = reaching_values(expr) if isinstance(expr.ctx, ast.Load) else None
            return values is None or any(rec(v) for v in values)
        if isinstance(expr, ast.Attribute):
            if expr.attr in _NON_TENSOR_ATTRS or _root_name(expr) in host_names(analysis.semantic):
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
        analysis = self.loop.analysis
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


def module_names(semantic: Semantic) -> frozenset[str]:
    """Dotted names that hold a ``nn.Module`` (a model or a loss module): assigned
    a torch.nn/transformers model or a same-module ``nn.Module`` subclass, receivers
    of ``.parameters()``/``.train()``/``.eval()``, and the conventional names."""
    classes = _module_classes(semantic)
    names: set[str] = set()

    def is_module_expr(value: ast.AST) -> bool:
        # Through at most five `.to(...)`-like calls; a loop, not recursion: a closure
        # that calls itself is a reference cycle (``Context.release``).
        for _ in range(6):
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
            if attr not in _MODULE_METHODS:
                return False
            value = value.func.value  # type: ignore[union-attr]
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
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and is_module_expr(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    dotted = dotted_name(target)
                    if dotted:
                        names.add(dotted)
        if len(names) == before:
            break
    return frozenset(names)


def is_module_name(expr: ast.AST, names: frozenset[str]) -> bool:
    """``expr`` names a module: one of ``names``, or a conventional name (``model``, ``criterion``)."""
    dotted = dotted_name(expr)
    if dotted is None:
        return False
    return dotted in names or dotted.rsplit(".", 1)[-1] in _MODULE_NAMES


def _module_classes(semantic: Semantic) -> set[str]:
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


# The calls that parse the command line into a namespace of host values.
PARSE_ARGS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args"})


def host_names(semantic: Semantic) -> frozenset[str]:
    """Names that hold host values wherever the module binds them (found once per module):
    an argparse namespace (``args = parser.parse_args()``; ``args, _ =
    parser.parse_known_args()``) and a counter of ``range`` (``for i in range(n)``, the
    index of ``enumerate``), when nothing else is assigned to the name. Their attributes
    and arithmetic (``i % args.d_reg_every == 0``) are Python numbers, never tensors."""
    found = semantic.__dict__.get("_xlalint_host_names")
    if found is not None:
        return found
    candidates: set[str] = set()
    others: set[str] = set()
    for node in semantic.nodes_of(ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            counter = _counter_of(node, semantic)
            bound = target_names(node.target)
            candidates.update(bound & {counter} if counter else set())
            others.update(bound - {counter} if counter else bound)
            continue
        value = node.value
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if isinstance(node, ast.AugAssign):
            others.update(n for t in targets for n in target_names(t))
            continue
        if isinstance(value, ast.Call) and method_name(value) in PARSE_ARGS:
            for target in targets:
                first = target.elts[0] if isinstance(target, (ast.Tuple, ast.List)) and target.elts else target
                if isinstance(first, ast.Name):
                    candidates.add(first.id)
            continue
        others.update(n for t in targets for n in target_names(t))
    found = semantic.__dict__["_xlalint_host_names"] = frozenset(candidates - others)
    return found


def _counter_of(loop: ast.For | ast.AsyncFor, semantic: Semantic) -> str | None:
    """``i`` of ``for i in range(...)`` or ``for i, batch in enumerate(...)``."""
    iterable = loop.iter
    if not isinstance(iterable, ast.Call) or not isinstance(iterable.func, ast.Name):
        return None
    if iterable.func.id == "range" and isinstance(loop.target, ast.Name):
        return loop.target.id
    if iterable.func.id == "enumerate" and isinstance(loop.target, ast.Tuple) and loop.target.elts:
        first = loop.target.elts[0]
        return first.id if isinstance(first, ast.Name) else None
    return None


def _root_name(expr: ast.AST) -> str | None:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


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


def _batch_names(target: ast.AST, iterable: ast.AST) -> set[str]:
    """The names a ``for`` loop binds to batches: ``batch`` in ``for i, batch in enumerate(dl)``."""
    if isinstance(iterable, ast.Call) and iterable.args:
        wrapper = (dotted_name(iterable.func) or "").rsplit(".", 1)[-1]
        if wrapper == "enumerate":
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                return target_names(target.elts[1])
            return set()
        if wrapper in ("tqdm", "iter", "islice"):
            return _batch_names(target, iterable.args[0])
    return target_names(target)


def _bind(target: ast.AST, value: ast.expr, is_tensor, names: set[str]) -> None:
    """Mark the names ``target`` binds as tensors when ``value`` is one (pairwise for
    ``a, b = x, y``; all of them for ``loss, logits = model(x)``)."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        for t, v in zip(target.elts, value.elts):
            _bind(t, v, is_tensor, names)
        return
    if is_tensor(value):
        names.update(target_names(target))


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
