"""The models and optimizers of a module, and where the models go to the XLA device.

The facts XLA204, XLA501 and XLA502 share (flow-insensitive, one file, as the rest of
``xlalint.analysis``):

- the *optimizers*: every constructor of an optimizer class (``torch.optim.*``, HF's
  ``AdamW``/``Adafactor``, another library's ``*.optim*.<Class>``, and a known optimizer
  name brought in by a star import such as ``from transformers import *``), the
  statement that builds it, and the *models whose parameters it holds*: the receivers
  of ``.parameters()``/``.named_parameters()`` in its ``params`` argument, followed
  through parameter groups (``[{"params": ...}, ...]``), comprehensions, ``filter``,
  ``chain`` and variables. An optimizer built in a same-module helper from one of its
  parameters (``def make_opt(m): return AdamW(m.parameters())``) is built, for each call
  of the helper, at the call with the model passed there;
- the *moves* of a model to the XLA device: ``m.to(<XLA device>)`` as a statement or
  assigned (``m = m.to(dev)``, ``m = Net().to(dev)``), the device followed through
  variables, ``self.<attr>`` and the arguments of every call of the function; and
  ``accelerator.prepare(m, ...)`` (accelerate moves what it prepares, and on XLA re-points
  the optimizers prepared in the *same* call at the new parameters). Moving a module
  moves its submodules: ``Wrapper(model).to(dev)`` (or ``w = Wrapper(model)`` then
  ``w.to(dev)``) is a move of ``model`` too, when the wrapper holds it (see
  :meth:`TrainingObjects.held_submodules`), and ``self.model = model.to(dev)`` is a move
  of ``model``;
- the moves *in other functions* of a model whose optimizer was built before them: the
  model and its optimizer followed through the returns and the calls of the module's
  functions and classes, a few calls deep (:meth:`TrainingObjects.carried_move`);
- the *tied models*: those built from an HF class that ties its input and output
  embeddings (``*ForCausalLM``, ``*LMHeadModel``, ``*ForMaskedLM``,
  ``*ForConditionalGeneration``, their ``Auto*`` forms), or from a class whose
  ``__init__`` ties two weights (``self.head.weight = self.embed.weight``), of the module
  or imported from a local module of the project (``from model import Transformer``,
  ``analysis/project.py``). A tie under ``if tie_weights:`` (a parameter of ``__init__``)
  counts unless the construction gives that parameter a literal that skips it (or leaves
  it to such a default): an unknown value (``args.tied``) may tie;
- the statement that builds a model (a call that makes fresh weights, not a load or a
  copy); an HF ``from_pretrained`` that adds a freshly initialised head counts.

Built once per module on first use (``Context.training_objects``).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from xlalint.analysis.order import is_optimizer_class
from xlalint.analysis.reaching import reaching_values
from xlalint.analysis.semantic import (
    ancestors,
    dotted_name,
    enclosing_function,
    enclosing_statement,
    keyword_value,
    method_name,
    parent,
    string_value,
)
from xlalint.analysis.values import (
    FUNCTIONS,
    assigned_values,
    call_sites,
    enclosing,
    enclosing_scopes,
    is_self_attr,
    parameter_names,
    passed_argument,
    walk_scope,
)

if TYPE_CHECKING:
    from xlalint.analysis.devices import DeviceAnalysis
    from xlalint.analysis.project import ProjectView
    from xlalint.analysis.semantic import Semantic

XLA_DEVICE_CALLS = frozenset({"torch_xla.device", "torch_xla.torch_xla.device", "torch_xla.core.xla_model.xla_device"})
TORCH_DEVICE = frozenset({"torch.device"})
# Optimizer classes by name, for a name a star import brings in (`from torch.optim import *`).
OPTIMIZER_NAMES = frozenset(
    {
        *("SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop"),
        *("LBFGS", "SparseAdam", "Adafactor", "Lamb", "LAMB", "Lion"),
    }
)
STAR_OPTIMIZER_MODULES = frozenset(
    {"torch.optim", "transformers", "transformers.optimization", "torch_xla.amp.syncfree"}
)
PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})
ACCELERATE_PREPARE = "prepare"
# HF model classes that tie the input and output embeddings (`tie_word_embeddings=True`).
TIED_HF_CLASS = re.compile(r"(ForCausalLM|LMHeadModel|ForMaskedLM|ForConditionalGeneration|WithLMHead|ForSeq2SeqLM)$")
# HF task classes whose head `from_pretrained` initialises afresh on a base checkpoint.
HEAD_CLASS = re.compile(r"For(SequenceClassification|TokenClassification|QuestionAnswering|MultipleChoice)$")
HEAD_ARGUMENTS = frozenset({"num_labels", "id2label", "label2id"})
# Calls whose value is not a freshly initialised model.
NOT_BUILT = frozenset({"from_pretrained", "load", "deepcopy", "to", "cuda", "train", "eval", "float", "half"})
MOVES = frozenset({"to", "cuda"})
_MAX_DEPTH = 4
# Bases that make a class of the module an ``nn.Module`` (by qualified name).
MODULE_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "pytorch_lightning.LightningModule",
        "transformers.PreTrainedModel",
        "transformers.modeling_utils.PreTrainedModel",
    }
)
# torch's module classes that hold the modules given to them positionally (a list's for
# `ModuleList`): moving the container moves them.
TORCH_CONTAINERS = frozenset(
    {
        "torch.nn.Sequential",
        "torch.nn.ModuleList",
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)
# Methods that register their argument as a submodule.
ADD_MODULE = frozenset({"add_module", "register_module"})
# How many calls (or returns) a model and its optimizer are followed across, and how many
# calls of each function are looked at: a bounded amount of work per optimizer.
CALL_DEPTH = 3
CALLS_PER_STEP = 16


@dataclass(frozen=True)
class Optimizer:
    """An optimizer built at ``statement`` (the call of the helper that builds it, when
    it is built in one) from the parameters of ``models``, dotted names as they are
    spelled at ``statement``."""

    call: ast.Call
    statement: ast.stmt
    models: tuple[str, ...]
    #: The name it is bound to at ``statement`` (``opt`` in ``opt = AdamW(...)``), if any.
    name: str | None
    #: The statements of its function, before ``statement``, that take the parameters it
    #: is given from the models (``groups = [{"params": [p for n, p in
    #: model.named_parameters() ...]}]``): they hold the same parameter objects.
    taken: tuple[ast.stmt, ...] = ()


@dataclass(frozen=True)
class Move:
    """``model`` goes to the XLA device at ``statement``: ``model.to(dev)``,
    ``model = Net().to(dev)``, or ``accelerator.prepare(model, ...)``."""

    call: ast.Call
    statement: ast.stmt
    model: str
    kind: str  # "to" | "prepare"
    #: For ``prepare``: the dotted names of every argument prepared in the same call.
    prepared: tuple[str, ...] = ()
    #: The construction of the wrapper module whose move moves ``model`` with it
    #: (``DiffusionTrainer(model, ...)`` in ``DiffusionTrainer(model, ...).to(dev)``).
    wrapper: ast.Call | None = None
    #: The move binds the moved model to another name (``self.model = model.to(dev)``).
    renamed: bool = False


@dataclass(frozen=True)
class CarriedMove:
    """A move, in another function than the one that built the optimizer, of a model
    the optimizer holds: the model and the optimizer got there through ``calls`` (each
    call of a function that received them, or whose return gave them), in order."""

    move: Move
    calls: tuple[ast.Call, ...]


class TrainingObjects:
    """The models, optimizers and model moves of one module, computed on first use."""

    def __init__(self, semantic: Semantic, project: ProjectView | None = None, devices: DeviceAnalysis | None = None):
        self.semantic = semantic
        #: The local modules the module imports (``from model import Transformer``), if known.
        self.project = project
        #: The device analysis: which CUDA devices XLA104's port makes the XLA device.
        self.devices = devices
        self._device_names: dict[tuple[int, str, bool], bool] = {}
        self._held_models: dict[int, list[ast.expr]] = {}
        self._stored_parameters: dict[int, frozenset[str]] = {}
        self._module_class_answers: dict[int, bool] = {}
        self._callee_moves: dict[tuple, CarriedMove | None] = {}
        self._returns_of: dict[int, list[ast.Return]] = {}
        self._wrapper_names: dict[tuple[int, str], tuple[list[tuple[str, ast.Call]], bool]] = {}
        self._values_by_scope: dict[int, dict[str, list[ast.expr]]] = {}

    # -- optimizers -------------------------------------------------------------------------
    @cached_property
    def _star_optimizers(self) -> bool:
        return any(
            node.module in STAR_OPTIMIZER_MODULES and any(alias.name == "*" for alias in node.names)
            for node in self.semantic.nodes_of(ast.ImportFrom)
        )

    def is_optimizer_call(self, call: ast.Call) -> bool:
        """A call that builds an optimizer, whatever the import."""
        qualified = self.semantic.call_name(call)
        if qualified is not None:
            if is_optimizer_class(qualified):
                return True
            module, _, name = qualified.rpartition(".")
            return ".optim" in module and name[:1].isupper() and "Scheduler" not in name and "LR" not in name
        return (
            isinstance(call.func, ast.Name)
            and call.func.id in OPTIMIZER_NAMES
            and self._star_optimizers
            and call.func.id not in self.semantic.module_functions
            and not any(c.name == call.func.id for c in self.semantic.nodes_of(ast.ClassDef))
        )

    @cached_property
    def optimizer_calls(self) -> list[ast.Call]:
        """Every call of the module that builds an optimizer, whatever it is given."""
        found: list[ast.Call] = []
        for call in self.semantic.calls:
            func = call.func
            # A cheap first test: optimizers are classes (`SGD`, `AdamW`), spelled capitalised.
            last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if last[:1].isupper() and self.is_optimizer_call(call):
                found.append(call)
        return found

    @cached_property
    def optimizers(self) -> list[Optimizer]:
        found: list[Optimizer] = []
        for call in self.optimizer_calls:
            statement = enclosing_statement(call)
            receivers = self.held_models(call)
            models = {name for name in (dotted_name(m) for m in receivers) if name}
            if not models or statement is None:
                continue
            found.extend(self._built_at(call, statement, models, _taken_before(receivers, statement)))
        return found

    def held_models(self, call: ast.Call) -> list[ast.expr]:
        """The receivers of ``.parameters()``/``.named_parameters()`` whose values the
        optimizer built by ``call`` is given (its ``params`` argument), through parameter
        groups, comprehensions and variables."""
        # Kept per call: XLA209 asks it of every optimizer for every wrap.
        found = self._held_models.get(id(call))
        if found is None:
            params = call.args[0] if call.args else keyword_value(call, "params")
            found = self._receivers_in(params, 0, set()) if params is not None else []
            self._held_models[id(call)] = found
        return found

    def optimizer_calls_of(self, optimizer: ast.expr | None) -> list[ast.Call]:
        """The optimizer constructor calls that ``optimizer`` (a name or ``self.<attr>``)
        is assigned in the scope that binds it (``opt = AdamW(...)``)."""
        if isinstance(optimizer, ast.Name):
            values = self._values_of(optimizer)
        elif (
            isinstance(optimizer, ast.Attribute)
            and isinstance(optimizer.value, ast.Name)
            and optimizer.value.id == "self"
        ):
            cls = enclosing(optimizer, ast.ClassDef)
            values = list(assigned_values(cls, lambda t, a=optimizer.attr: is_self_attr(t, a))) if cls else []
        else:
            values = []
        return [v for v in values if isinstance(v, ast.Call) and self.is_optimizer_call(v)]

    def _built_at(
        self, call: ast.Call, statement: ast.stmt, models: set[str], taken: tuple[ast.stmt, ...]
    ) -> Iterator[Optimizer]:
        """Where the optimizer is built and from which models: here, or, when the models
        are parameters of the same-module function that builds it, at each call of it."""
        function = enclosing_function(call)
        roots = {model.split(".", 1)[0] for model in models}
        parameters = parameter_names(function) - {"self", "cls"} if function is not None else set()
        yield Optimizer(call, statement, tuple(sorted(models)), _binding(statement, call), taken)
        if not function or not roots <= parameters:
            return
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        if positional and positional[0] in ("self", "cls"):
            positional = positional[1:]
        for site in call_sites(function, self.semantic):
            site_statement = enclosing_statement(site)
            passed: set[str] = set()
            for model in models:
                root, _, rest = model.partition(".")
                argument = _argument(site, root, positional)
                name = dotted_name(argument) if argument is not None else None
                if name:
                    passed.add(f"{name}.{rest}" if rest else name)
            if passed and site_statement is not None:
                yield Optimizer(site, site_statement, tuple(sorted(passed)), _binding(site_statement, site))

    def _receivers_in(self, expr: ast.AST, depth: int, seen: set[int]) -> list[ast.expr]:
        found: list[ast.expr] = []
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Call) and method_name(node) in PARAMETER_METHODS:
                # Its receiver is the model: what the model's name holds is not followed.
                found.append(node.func.value)  # type: ignore[attr-defined]
                stack.extend([*node.args, *node.keywords])
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and depth < _MAX_DEPTH:
                if id(node) in seen:
                    continue
                seen.add(id(node))
                values = self._values_of(node)
                if len(values) > 1:
                    # A name assigned many times: the assignments that reach this read.
                    values = reaching_values(node) or values
                for value in values:
                    found.extend(self._receivers_in(value, depth + 1, seen))
            stack.extend(ast.iter_child_nodes(node))
        return found

    def _values_of(self, name: ast.Name) -> list[ast.expr]:
        for scope in enclosing_scopes(name):
            values = self._scope_values(scope).get(name.id)
            if values:
                return values
        return []

    def _scope_values(self, scope: ast.AST) -> dict[str, list[ast.expr]]:
        """The values assigned to each plain name of ``scope`` (not in nested functions),
        found once per scope: many names are looked up in each."""
        found = self._values_by_scope.get(id(scope))
        if found is None:
            found = self._values_by_scope[id(scope)] = {}
            matched: list[str] = []  # `assigned_values` yields a target's value right after matching it

            def is_name(target: ast.AST) -> bool:
                if isinstance(target, ast.Name):
                    matched.append(target.id)
                    return True
                return False

            for value in assigned_values(scope, is_name, shallow=True):
                found.setdefault(matched.pop(), []).append(value)
        return found

    @cached_property
    def _parameter_reads_by_scope(self) -> dict[ast.AST | None, list[ast.Call]]:
        found: dict[ast.AST | None, list[ast.Call]] = {}
        for call in self.semantic.calls_of(*PARAMETER_METHODS):
            if isinstance(call.func, ast.Attribute) and dotted_name(call.func.value):
                found.setdefault(enclosing_function(call), []).append(call)
        return found

    def parameter_reads(self, model: str, scope: ast.AST | None) -> list[ast.Call]:
        """The ``.parameters()``/``.named_parameters()`` calls in ``scope`` (a function, or
        None: module level) on ``model``, a part of it or what it is part of, in source
        order: each takes the parameter objects the model holds at that point."""
        return [
            call
            for call in self._parameter_reads_by_scope.get(scope, [])
            if same_object_tree(model, dotted_name(call.func.value))  # type: ignore[attr-defined,arg-type]
        ]

    def optimizers_of(self, model: str, scope: ast.AST | None) -> list[Optimizer]:
        """The optimizers built in ``scope`` (a function, or None: module level) that hold
        parameters of ``model`` (of ``model`` or a part of it, or of what it is part of)."""
        return [
            optimizer
            for optimizer in self.optimizers
            if enclosing_function(optimizer.statement) is scope
            and any(same_object_tree(model, held) for held in optimizer.models)
        ]

    # -- the XLA device and moves -------------------------------------------------------------
    def is_xla_device(self, expr: ast.AST | None, depth: int = 0, ported: bool = False) -> bool:
        """``expr`` is the XLA device: ``torch_xla.device()``, ``xm.xla_device()``,
        ``"xla"``, ``torch.device("xla")``, or a variable, ``self.<attr>`` or function
        parameter that holds one. ``ported``: or, in an XLA script, a CUDA device that
        XLA104's port makes the XLA device (a variable: when one of its values is)."""
        if expr is None or depth > _MAX_DEPTH:
            return False
        if ported and self._ports_cuda_devices and self.devices.is_cuda_device(expr):  # type: ignore[union-attr]
            return True
        text = string_value(expr)
        if text is not None:
            return text == "xla" or text.startswith("xla:")
        if isinstance(expr, ast.Call):
            name = self.semantic.call_name(expr)
            if name in XLA_DEVICE_CALLS:
                return True
            return name in TORCH_DEVICE and bool(expr.args) and self.is_xla_device(expr.args[0], depth + 1, ported)
        if isinstance(expr, ast.Name):
            # Many `.to(device)` calls ask about one `device`: answered once per scope.
            key = (id(enclosing_function(expr)), expr.id, ported)
            known = self._device_names.get(key)
            if known is None:
                known = self._device_names[key] = self._name_is_xla_device(expr, depth, ported)
            return known
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = enclosing(expr, ast.ClassDef)
            if cls is not None:
                values = assigned_values(cls, lambda t, a=expr.attr: is_self_attr(t, a))
                return any(self.is_xla_device(v, depth + 1, ported) for v in values)
        return False

    def _name_is_xla_device(self, expr: ast.Name, depth: int, ported: bool = False) -> bool:
        for scope in enclosing_scopes(expr):
            values = list(assigned_values(scope, lambda t, n=expr.id: _is_name(t, n), shallow=True))
            if values:
                return any(self.is_xla_device(v, depth + 1, ported) for v in values)
            if isinstance(scope, FUNCTIONS) and expr.id in parameter_names(scope):
                return self._passed_xla_device(scope, expr.id, depth, ported)
        return False

    @cached_property
    def _may_name_xla_device(self) -> bool:
        """A cheap first test: the module imports torch_xla or spells ``"xla"``."""
        if self.semantic.imports.imports_module("torch_xla"):
            return True
        return any(
            isinstance(c.value, str) and (c.value == "xla" or c.value.startswith("xla:"))
            for c in self.semantic.nodes_of(ast.Constant)
        )

    @cached_property
    def _ports_cuda_devices(self) -> bool:
        """In an XLA script (one that imports torch_xla, or is taken as one once XLA104's
        port is applied: ``engine/lint.py``'s findings after the port), a CUDA device is the
        XLA device: the port makes ``device = "cuda"`` (``torch.device("cuda:0")``,
        ``torch.accelerator.current_accelerator()``) ``torch_xla.device()``."""
        return self.devices is not None and self.semantic.imports.imports_module("torch_xla")

    def _passed_xla_device(self, function: ast.AST, parameter: str, depth: int, ported: bool = False) -> bool:
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]  # type: ignore[attr-defined]
        if positional and positional[0] in ("self", "cls") and enclosing(function, ast.ClassDef) is not None:
            positional = positional[1:]
        sites = list(call_sites(function, self.semantic))  # type: ignore[arg-type]
        cls = enclosing(function, ast.ClassDef)
        if function.name == "__init__" and cls is not None:  # type: ignore[attr-defined]
            # `Trainer(model, device)` calls `__init__`.
            sites = [c for c in self.semantic.calls if isinstance(c.func, ast.Name) and c.func.id == cls.name]  # type: ignore[attr-defined]
        return bool(sites) and all(
            self.is_xla_device(_argument(site, parameter, positional), depth + 1, ported) for site in sites
        )

    @cached_property
    def moves(self) -> list[Move]:
        """Every move of a named object to the XLA device (a model or not: callers match
        the names they know to be models) under its own name: not the moves of a model
        inside a wrapper, nor under another name (``net = model.to(dev)``), which
        ``all_moves`` adds."""
        return [move for move in self.all_moves if move.wrapper is None and not move.renamed]

    @cached_property
    def all_moves(self) -> list[Move]:
        """``moves``, and the moves of a model inside a wrapper module that holds it
        (``Wrapper(model).to(dev)``) or that give it another name (``self.model =
        model.to(dev)``): what ``moves_of``, ``move_before`` and ``move_after`` ask."""
        found: list[Move] = []
        for call in self.semantic.calls_of("to", ACCELERATE_PREPARE):
            name = method_name(call)
            if name == "to":
                device = call.args[0] if call.args else keyword_value(call, "device")
                if (self._may_name_xla_device and self.is_xla_device(device)) or (
                    self._ports_cuda_devices and self.is_xla_device(device, ported=True)
                ):
                    move = self._to_move(call)
                else:
                    continue
            elif name == ACCELERATE_PREPARE and call.args:
                move = self._prepare_move(call)
            else:
                continue
            if move is not None:
                found.extend(move)
        return found

    def _to_move(self, call: ast.Call) -> list[Move]:
        statement = enclosing_statement(call)
        if statement is None:
            return []
        receiver = call.func.value  # type: ignore[attr-defined]
        target = _assigned_name(statement, call)
        name = dotted_name(receiver)
        found: list[Move] = []
        if name is not None:
            # `model.to(dev)`, `model = model.to(dev)`, `self.model = model.to(dev)`.
            found.append(Move(call, statement, name, "to", renamed=target is not None and target != name))
        if target is not None and target != name:
            # `model = Net().to(dev)`: the new model is on the device from the start.
            found.append(Move(call, statement, target, "to"))
        for held, wrapper in self._held_by_receiver(receiver):
            found.append(Move(call, statement, held, "to", wrapper=wrapper))
        return found

    def _held_by_receiver(self, receiver: ast.expr) -> list[tuple[str, ast.Call]]:
        """The submodules a moved module holds, with the wrapper construction that gave
        them: ``Wrapper(model)`` itself, or a name whose every value is one holding the
        same model (``w = Wrapper(model)`` ... ``w.to(dev)``), else every value reaching
        the move is."""
        if isinstance(receiver, ast.Call):
            return [(held, receiver) for held in self.held_submodules(receiver)]
        if not isinstance(receiver, ast.Name):
            return []
        key = (id(enclosing_function(receiver)), receiver.id)
        known = self._wrapper_names.get(key)
        if known is None:
            # Once per name and scope: most moves are of names no wrapper is assigned to.
            values = self._values_of(receiver)
            held_by_all = self._held_by_all(values)
            known = self._wrapper_names[key] = (held_by_all, not held_by_all and self._held_by_any(values))
        held_by_all, some = known
        if held_by_all or not some:
            return held_by_all
        return self._held_by_all(reaching_values(receiver) or [])

    def _held_by_all(self, values: list[ast.expr]) -> list[tuple[str, ast.Call]]:
        """The submodules every one of ``values`` (wrapper constructions, possibly moved)
        holds, with the first construction that holds each."""
        common: dict[str, ast.Call] | None = None
        for value in values:
            built = _unmoved(value)
            held = {name: built for name in self.held_submodules(built)} if isinstance(built, ast.Call) else {}
            common = held if common is None else {name: common[name] for name in common if name in held}
            if not common:
                return []
        return sorted((common or {}).items())

    def _held_by_any(self, values: list[ast.expr]) -> bool:
        return any(isinstance(v := _unmoved(value), ast.Call) and self.held_submodules(v) for value in values)

    def held_submodules(self, call: ast.Call) -> list[str]:
        """The dotted names of the modules that the module ``call`` builds holds as
        submodules, so that moving it moves them: the arguments a class of this module
        (an ``nn.Module``) stores as attributes in its ``__init__`` (``self.model =
        model``, ``self.add_module("m", model)``), and the positional arguments (a list's
        items for ``ModuleList``) of torch's containers and data-parallel wrappers
        (``nn.Sequential(model, head)``, ``nn.DataParallel(model)``). Other imported
        classes are not known to hold what they are given."""
        qualified = self.semantic.call_name(call)
        if qualified in TORCH_CONTAINERS:
            given = [
                item
                for argument in call.args
                for item in (argument.elts if isinstance(argument, (ast.List, ast.Tuple)) else [argument])
            ]
            return [name for name in (dotted_name(a) for a in given) if name]
        cls = self._module_class_of(call.func) if qualified is None else None
        if cls is None and self.project is not None and self.project.origin(call.func) is not None:
            # A wrapper defined in a local module (`from diffusion import Trainer`).
            local = self.project.class_of(call.func)
            cls = local.node if local is not None and _subclasses_a_module(local.node) else None
        elif cls is not None and not self._is_module_class(cls, 0):
            cls = None
        if cls is None:
            return []
        init = _method(cls, "__init__")
        if init is None:
            return []
        found = []
        # After `self` (the class may be a local module's, whose tree has no parent links).
        positional = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
        for parameter in sorted(self._parameters_stored(init)):
            argument = _argument(call, parameter, positional)
            name = dotted_name(argument) if argument is not None else None
            if name:
                found.append(name)
        return found

    @cached_property
    def _module_classes(self) -> dict[str, ast.ClassDef]:
        return {stmt.name: stmt for stmt in self.semantic.tree.body if isinstance(stmt, ast.ClassDef)}

    def _module_class_of(self, func: ast.expr) -> ast.ClassDef | None:
        return self._module_classes.get(func.id) if isinstance(func, ast.Name) else None

    def _is_module_class(self, cls: ast.ClassDef, depth: int) -> bool:
        """``cls`` derives from ``nn.Module`` (directly, or through classes of the module)."""
        known = self._module_class_answers.get(id(cls))
        if known is None:
            self._module_class_answers[id(cls)] = False  # a cycle of bases is not a module
            known = depth <= _MAX_DEPTH and any(
                self.semantic.qualified_name(base) in MODULE_BASES
                or (
                    (base_class := self._module_class_of(base)) is not None
                    and self._is_module_class(base_class, depth + 1)
                )
                for base in cls.bases
            )
            self._module_class_answers[id(cls)] = known
        return known

    def _parameters_stored(self, init: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        """The parameters of ``__init__`` it stores as attributes of ``self``."""
        known = self._stored_parameters.get(id(init))
        if known is not None:
            return known
        positional = [a.arg for a in (*init.args.posonlyargs, *init.args.args)]
        me = positional[0] if positional else None
        parameters = parameter_names(init) - {me}
        stored: set[str] = set()
        for node in walk_scope(init, shallow=True):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in parameters:
                if any(
                    isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me
                    for t in node.targets
                ):
                    stored.add(node.value.id)
            elif (
                isinstance(node, ast.Call)
                and method_name(node) in ADD_MODULE
                and isinstance(node.func.value, ast.Name)  # type: ignore[attr-defined]
                and node.func.value.id == me  # type: ignore[attr-defined]
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Name)
                and node.args[1].id in parameters
            ):
                stored.add(node.args[1].id)
        known = self._stored_parameters[id(init)] = frozenset(stored)
        return known

    def _prepare_move(self, call: ast.Call) -> list[Move]:
        """``accelerator.prepare(model, opt, ...)`` on an ``accelerate.Accelerator``."""
        receiver = call.func.value  # type: ignore[attr-defined]
        if not self._is_accelerator(receiver):
            return []
        statement = enclosing_statement(call)
        names = tuple(n for n in (dotted_name(a) for a in call.args) if n)
        if statement is None:
            return []
        return [Move(call, statement, name, "prepare", names) for name in names]

    def _is_accelerator(self, expr: ast.AST) -> bool:
        name = dotted_name(expr) or ""
        if "accelerator" in name.rsplit(".", 1)[-1].lower():
            return True
        if isinstance(expr, ast.Name):
            return any(
                (self.semantic.call_name(v) or "").endswith("Accelerator")
                for scope in enclosing_scopes(expr)
                for v in assigned_values(scope, lambda t, n=expr.id: _is_name(t, n), shallow=True)
            )
        return False

    def moves_of(self, model: str, scope: ast.AST | None) -> list[Move]:
        """The moves in ``scope`` (a function, or None: module level) of ``model``, of what
        it is part of, or of a part of it, in source order."""
        _, moves = self._moves_by_root.get((id(scope), model.split(".", 1)[0]), ((), []))
        return [m for m in moves if same_object_tree(model, m.model)]

    def move_before(self, model: str, scope: ast.AST | None, at: tuple[int, int]) -> Move | None:
        """The last move of ``model`` (as in ``moves_of``) in ``scope`` whose statement
        starts before ``at``."""
        positions, moves = self._moves_by_root.get((id(scope), model.split(".", 1)[0]), ((), []))
        index = bisect.bisect_left(positions, at)
        return next((m for m in reversed(moves[:index]) if same_object_tree(model, m.model)), None)

    def move_after(self, model: str, scope: ast.AST | None, at: tuple[int, int]) -> Move | None:
        """The first move of ``model`` (as in ``moves_of``) in ``scope`` whose statement
        starts after ``at``."""
        positions, moves = self._moves_by_root.get((id(scope), model.split(".", 1)[0]), ((), []))
        index = bisect.bisect_right(positions, at)
        return next((m for m in moves[index:] if same_object_tree(model, m.model)), None)

    @cached_property
    def _moves_by_root(self) -> dict[tuple[int, str], tuple[list[tuple[int, int]], list[Move]]]:
        """(id of the function, or of None at module level; the first name of the moved
        model) -> the moves there, with their statements' positions, in source order: a
        move is asked for by position, once per optimizer."""
        found: dict[tuple[int, str], tuple[list[tuple[int, int]], list[Move]]] = {}
        for move in sorted(self.all_moves, key=lambda m: _position(m.statement)):
            key = (id(enclosing_function(move.statement)), move.model.split(".", 1)[0])
            positions, moves = found.setdefault(key, ([], []))
            positions.append(_position(move.statement))
            moves.append(move)
        return found

    # -- across functions -------------------------------------------------------------------
    def carried_move(self, optimizer: Optimizer) -> CarriedMove | None:
        """The first move, in another function, of a model ``optimizer`` holds, that the
        model reaches together with the optimizer after it is built: returned with it
        (``model, opt = load_train_objs()`` then ``model.to(dev)``), or passed with it to
        a function or class of the module that moves the model (``Trainer(model, opt)``
        whose ``__init__`` does ``self.model = model.to(dev)``), and in that function
        no optimizer is built again after the move. At most ``CALL_DEPTH`` calls away."""
        scope = enclosing_function(optimizer.statement)
        optimizers = {optimizer.name} if optimizer.name else set()
        return self._carried_from(scope, _end(optimizer.statement), set(optimizer.models), optimizers, 0, ())

    def _carried_from(
        self,
        scope: ast.AST | None,
        end: tuple[int, int],
        models: set[str],
        optimizers: set[str],
        depth: int,
        calls: tuple[ast.Call, ...],
        returns: bool = True,
    ) -> CarriedMove | None:
        """What ``scope`` does, after ``end``, with ``models`` and ``optimizers`` (names
        it holds there): moves them itself (not at depth 0: that is the rule's own
        question), passes both to a function that does, or (``returns``) returns both to
        the callers. A function entered through a call returns to that call only, which
        is not followed."""
        if depth > 0 and optimizers:
            for model in sorted(models):
                move = self.move_after(model, scope, end)
                if move is not None and not self._built_again(move, scope):
                    return CarriedMove(move, calls)
        if depth >= CALL_DEPTH:
            return None
        for call in self._calls_passing(scope, models, end):
            found = self._moves_in_callee(call, models, optimizers, depth + 1)
            if found is not None:
                return CarriedMove(found.move, (*calls, call, *found.calls))
        if returns and isinstance(scope, FUNCTIONS):
            for site, returned_models, returned_optimizers in self._returned_to(scope, models, optimizers, end):
                statement = enclosing_statement(site)
                if statement is None:
                    continue
                found = self._carried_from(
                    enclosing_function(site), _end(statement), returned_models, returned_optimizers, depth + 1, ()
                )
                if found is not None:
                    return CarriedMove(found.move, (*calls, site, *found.calls))
            for outer, function, received_models, received_optimizers in self._starred_into(
                scope, models, optimizers, end
            ):
                key = (id(function), frozenset(received_models), frozenset(received_optimizers), depth + 1)
                if key not in self._callee_moves:
                    self._callee_moves[key] = None
                    self._callee_moves[key] = self._carried_from(
                        function, _position(function), received_models, received_optimizers, depth + 1, (), False
                    )
                found = self._callee_moves[key]
                if found is not None:
                    return CarriedMove(found.move, (*calls, outer, *found.calls))
        return None

    def _moves_in_callee(
        self, call: ast.Call, models: set[str], optimizers: set[str], depth: int
    ) -> CarriedMove | None:
        """A move in the function ``call`` calls (or deeper) of a model it is passed,
        when the optimizer is passed with it. Kept per callee and what it receives."""
        function = self._callee(call)
        if function is None:
            return None
        received_models = _receiving(call, function, models)
        received_optimizers = _receiving(call, function, optimizers)
        if not received_models or not received_optimizers:
            return None
        key = (id(function), frozenset(received_models), frozenset(received_optimizers), depth)
        if key not in self._callee_moves:
            self._callee_moves[key] = None  # a recursive call finds nothing more
            self._callee_moves[key] = self._carried_from(
                function, _position(function), received_models, received_optimizers, depth, (), returns=False
            )
        return self._callee_moves[key]

    def _built_again(self, move: Move, scope: ast.AST | None) -> bool:
        """An optimizer is built in ``scope`` after ``move`` from the moved model (or the
        name the move binds it to: ``self.model = model.to(dev)``)."""
        names = {move.model}
        target = _assigned_name(move.statement, move.call)
        if target:
            names.add(target)
        at = _position(move.statement)
        return any(
            _position(other.statement) > at
            and any(same_object_tree(name, held) for name in names for held in other.models)
            for other in self.optimizers_in(scope)
        )

    def optimizers_in(self, scope: ast.AST | None) -> list[Optimizer]:
        """The optimizers built in ``scope`` (a function, or None: module level)."""
        return self._optimizers_by_scope.get(id(scope), [])

    @cached_property
    def _optimizers_by_scope(self) -> dict[int, list[Optimizer]]:
        found: dict[int, list[Optimizer]] = {}
        for optimizer in self.optimizers:
            found.setdefault(id(enclosing_function(optimizer.statement)), []).append(optimizer)
        return found

    @cached_property
    def _passing_calls(self) -> dict[tuple[int, str], tuple[list[tuple[int, int]], list[ast.Call]]]:
        """(id of the function, or of None at module level; a dotted name) -> the calls
        of the module's functions and classes there given that name as an argument, with
        their positions, in source order."""
        found: dict[tuple[int, str], tuple[list[tuple[int, int]], list[ast.Call]]] = {}
        for call in sorted(self.semantic.calls, key=_position):
            arguments = [*call.args, *(k.value for k in call.keywords)]
            names = {dotted_name(a) for a in arguments if isinstance(a, (ast.Name, ast.Attribute))}
            names.discard(None)
            if names and self._callee(call) is not None:
                scope = id(enclosing_function(call))
                for name in names:
                    positions, calls = found.setdefault((scope, name), ([], []))  # type: ignore[arg-type]
                    positions.append(_position(call))
                    calls.append(call)
        return found

    def _calls_passing(self, scope: ast.AST | None, names: set[str], end: tuple[int, int]) -> list[ast.Call]:
        """The first ``CALLS_PER_STEP`` calls of the module's functions and classes in
        ``scope`` after ``end`` that are given one of ``names``."""
        found: list[ast.Call] = []
        for name in sorted(names):
            positions, calls = self._passing_calls.get((id(scope), name), ([], []))
            start = bisect.bisect_right(positions, end)
            found.extend(calls[start : start + CALLS_PER_STEP])
        return sorted(found, key=_position)[:CALLS_PER_STEP]

    def _returns(self, function: ast.AST) -> list[ast.Return]:
        """The ``return <value>`` statements of ``function`` (not of nested ones)."""
        found = self._returns_of.get(id(function))
        if found is None:
            found = self._returns_of[id(function)] = [
                node for node in walk_scope(function, shallow=True) if isinstance(node, ast.Return) and node.value
            ]
        return found

    def _callee(self, call: ast.Call) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The function of the module a call runs: ``f(...)`` (a module-level function),
        ``Cls(...)`` (the ``__init__`` of a module-level class), ``self.m(...)`` (a
        method of the enclosing class)."""
        func = call.func
        if isinstance(func, ast.Name):
            function = self.semantic.module_functions.get(func.id)
            if function is not None:
                return function
            cls = self._module_classes.get(func.id)
            return _method(cls, "__init__") if cls is not None else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            cls = enclosing(call, ast.ClassDef)
            return _method(cls, func.attr) if cls is not None else None  # type: ignore[arg-type]
        return None

    def _returned_to(
        self, function: ast.AST, models: set[str], optimizers: set[str], end: tuple[int, int]
    ) -> Iterator[tuple[ast.Call, set[str], set[str]]]:
        """For the first ``CALLS_PER_STEP`` calls of ``function`` whose value is
        unpacked into names, the names that receive ``models`` and ``optimizers`` from a
        ``return`` after ``end`` (``return model, optimizer``;
        ``model, optimizer = load_train_objs()``), when both are returned."""
        model_positions, optimizer_positions = self._return_positions(function, models, optimizers, end)
        if not model_positions or not optimizer_positions:
            return
        for site in list(call_sites(function, self.semantic))[:CALLS_PER_STEP]:  # type: ignore[arg-type]
            statement = enclosing_statement(site)
            if not isinstance(statement, ast.Assign) or statement.value is not site or len(statement.targets) != 1:
                continue
            target = statement.targets[0]
            received_models = _unpacked(target, model_positions)
            received_optimizers = _unpacked(target, optimizer_positions)
            if received_models and received_optimizers:
                yield site, received_models, received_optimizers

    def _return_positions(
        self, function: ast.AST, models: set[str], optimizers: set[str], end: tuple[int, int]
    ) -> tuple[set[int | None], set[int | None]]:
        """Where the returns of ``function`` after ``end`` hold ``models`` and
        ``optimizers`` (see ``_returned_positions``)."""
        model_positions: set[int | None] = set()
        optimizer_positions: set[int | None] = set()
        for node in self._returns(function):
            if _position(node) > end:
                model_positions |= _returned_positions(node.value, models)  # type: ignore[arg-type]
                optimizer_positions |= _returned_positions(node.value, optimizers)  # type: ignore[arg-type]
        return model_positions, optimizer_positions

    def _starred_into(
        self, function: ast.AST, models: set[str], optimizers: set[str], end: tuple[int, int]
    ) -> Iterator[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef, set[str], set[str]]]:
        """For the first ``CALLS_PER_STEP`` calls of ``function`` passed on with a star
        to a function or class of the module (``Runner(*build(lr))``), that callee and
        the parameters that receive ``models`` and ``optimizers`` from a returned tuple
        (``return model, opt``), when both are passed."""
        model_positions, optimizer_positions = self._return_positions(function, models, optimizers, end)
        if not model_positions or not optimizer_positions:
            return
        for site in list(call_sites(function, self.semantic))[:CALLS_PER_STEP]:  # type: ignore[arg-type]
            starred = parent(site)
            outer = parent(starred) if isinstance(starred, ast.Starred) else None
            if not isinstance(outer, ast.Call) or starred not in outer.args:
                continue
            index = outer.args.index(starred)  # type: ignore[arg-type]
            callee = self._callee(outer)
            if callee is None or any(isinstance(a, ast.Starred) for a in outer.args[:index]):
                continue
            positional = [a.arg for a in (*callee.args.posonlyargs, *callee.args.args)]
            if positional and positional[0] in ("self", "cls") and enclosing(callee, ast.ClassDef) is not None:
                positional = positional[1:]

            def received(
                positions: set[int | None], positional: list[str] = positional, index: int = index
            ) -> set[str]:
                return {positional[index + p] for p in positions if p is not None and index + p < len(positional)}

            received_models, received_optimizers = received(model_positions), received(optimizer_positions)
            if received_models and received_optimizers:
                yield outer, callee, received_models, received_optimizers

    # -- building models ----------------------------------------------------------------------
    def build_of(self, name: str, use: ast.AST) -> tuple[ast.stmt, ast.expr] | None:
        """The first statement that assigns ``name`` (or what it is part of:
        ``model.encoder`` is built with ``model``), seen from ``use``, and the value."""
        values = self.built_values(name, use)
        if not values:
            return None
        first = min(values, key=lambda v: (v.lineno, v.col_offset))
        statement = enclosing_statement(first)
        return (statement, first) if statement is not None else None

    def built_values(self, name: str, use: ast.AST) -> list[ast.expr]:
        """Every value assigned to ``name`` (or to what it is part of) in the scope
        that ``use`` sees it in: the function's own, else the enclosing ones; for
        ``self.<attr>``, the class."""
        while name:
            if name.startswith("self."):
                cls = enclosing(use, ast.ClassDef)
                values = list(assigned_values(cls, _matches(name))) if cls is not None else []
            else:
                values = []
                for scope in enclosing_scopes(use):
                    values = list(assigned_values(scope, _matches(name), shallow=True))
                    if values:
                        break
            if values:
                return values
            if "." not in name:
                return []
            name = name.rsplit(".", 1)[0]
        return []

    def builds_fresh_weights(self, value: ast.expr, name: str) -> bool:
        """``value`` makes a model with freshly initialised weights: a call (possibly
        ``.to(device)``) that is not a load or a copy, or an HF ``from_pretrained`` of a
        task class that adds a new head (``num_labels=``)."""
        base = value
        while isinstance(base, ast.Call) and method_name(base) in MOVES:
            base = base.func.value  # type: ignore[attr-defined]
        if not isinstance(base, ast.Call):
            return False
        callee = self.semantic.call_name(base) or dotted_name(base.func) or ""
        last = callee.rsplit(".", 1)[-1]
        if last == "from_pretrained":
            return self.adds_fresh_head(base)
        return last not in NOT_BUILT and dotted_name(base.func) != name

    def adds_fresh_head(self, call: ast.Call) -> bool:
        """``Cls.from_pretrained(..., num_labels=N)`` of an HF task class: its head is not
        in a base checkpoint, so each process draws its own."""
        owner = dotted_name(call.func.value) if isinstance(call.func, ast.Attribute) else None  # type: ignore[union-attr]
        cls = (owner or "").rsplit(".", 1)[-1]
        return bool(HEAD_CLASS.search(cls)) and any(k.arg in HEAD_ARGUMENTS for k in call.keywords)

    # -- tied weights -------------------------------------------------------------------------
    @cached_property
    def tying_classes(self) -> dict[str, tuple[ast.ClassDef, tuple[WeightTie, ...]]]:
        """Classes of the module whose ``__init__`` ties weights: class name -> the class
        and each tie (``head.weight`` from ``embed.weight``, and when it applies)."""
        classes: dict[str, ast.ClassDef] = {}
        for node in self.semantic.nodes_of(ast.Assign):
            value = node.value
            # A cheap first test on every assignment of the module: `... .weight = ... .weight`.
            if not (isinstance(value, ast.Attribute) and value.attr == "weight" and len(node.targets) == 1):
                continue
            init = enclosing_function(node)
            cls = enclosing(init, ast.ClassDef) if init is not None and init.name == "__init__" else None
            if cls is not None:
                classes[cls.name] = cls  # type: ignore[attr-defined]
        return {name: (cls, ties) for name, cls in classes.items() if (ties := weight_ties(cls))}

    def tied_class(self, value: ast.expr) -> tuple[str, tuple[Tie, ...]] | None:
        """For a value that builds a tied model: ("hf", ()) for an HF class that ties its
        embeddings, ("module", ties) for a class of this module, or of a local module it
        imports, whose ``__init__`` ties weights when built with these arguments."""
        base = value
        while isinstance(base, ast.Call) and method_name(base) in MOVES:
            base = base.func.value  # type: ignore[attr-defined]
        if not isinstance(base, ast.Call):
            return None
        func = base.func
        if isinstance(func, ast.Attribute) and func.attr in ("from_pretrained", "from_config"):
            func = func.value
        qualified = self.semantic.qualified_name(func) or ""
        name = dotted_name(func) or ""
        last = name.rsplit(".", 1)[-1]
        # `GPT.from_pretrained(...)` (nanoGPT) builds the class with arguments of its own.
        constructor = base if base.func is func else None
        if last in self.tying_classes and qualified == "":
            cls, ties = self.tying_classes[last]
            made = ties_made_by(constructor, cls, ties)
            return ("module", made) if made else None
        from_hf = qualified.startswith("transformers.") or (qualified == "" and self._star_transformers)
        if from_hf and TIED_HF_CLASS.search(last) and not self._untied_config(base):
            return "hf", ()
        if self.project is not None and not from_hf:
            local = self.project.class_of(func)
            made = ties_made_by(constructor, local.node, weight_ties(local.node)) if local is not None else ()
            return ("module", made) if made else None
        return None

    def _untied_config(self, call: ast.Call) -> bool:
        """The HF model is built with ``tie_word_embeddings=False``: given to the call
        itself, or to the config it is given (``GPT2Config(..., tie_word_embeddings=False)``,
        directly or through a name the enclosing scopes assign once)."""
        configs: list[ast.expr] = [call]
        given = keyword_value(call, "config") or (call.args[0] if call.args else None)
        if isinstance(given, ast.Call):
            configs.append(given)
        elif isinstance(given, ast.Name):
            for scope in enclosing_scopes(call):
                values = list(assigned_values(scope, lambda target: _is_name(target, given.id), shallow=True))
                if values:
                    configs.extend(v for v in values[:1] if len(values) == 1 and isinstance(v, ast.Call))
                    break
        return any(
            isinstance(flag := keyword_value(c, "tie_word_embeddings"), ast.Constant) and flag.value is False
            for c in configs
            if isinstance(c, ast.Call)
        )

    @cached_property
    def may_hold_tied_models(self) -> bool:
        """A cheap first test for XLA502: a class of the module ties weights, or a call
        names a class that ties embeddings."""
        if self.tying_classes or (self.project is not None and self.project.may_import_local()):
            return True
        for call in self.semantic.calls:
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in ("from_pretrained", "from_config"):
                func = func.value
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if TIED_HF_CLASS.search(name):
                return True
        return False

    @cached_property
    def _star_transformers(self) -> bool:
        return any(
            (node.module or "").startswith("transformers") and any(a.name == "*" for a in node.names)
            for node in self.semantic.nodes_of(ast.ImportFrom)
        )


@dataclass(frozen=True)
class WeightTie:
    """``self.<target> = self.<source>`` in a class's ``__init__`` (``head.weight`` from
    ``embed.weight``), and the ``__init__`` parameters whose truth it needs (``if
    tie_weights:`` -> ``(("tie_weights", True),)``)."""

    target: str
    source: str
    conditions: tuple[tuple[str, bool], ...] = ()


def weight_ties(cls: ast.ClassDef) -> tuple[WeightTie, ...]:
    """The weights ``cls.__init__`` ties, in source order (not those of functions it
    defines). Works on a tree without parent links (a local module's)."""
    init = _init_of(cls)
    if init is None:
        return ()
    parameters = parameter_names(init)
    found: list[WeightTie] = []
    stack: list[tuple[ast.stmt, tuple[tuple[str, bool], ...]]] = [(s, ()) for s in reversed(init.body)]
    while stack:
        node, conditions = stack.pop()
        if isinstance(node, ast.Assign):
            if len(node.targets) == 1 and isinstance(node.value, ast.Attribute) and node.value.attr == "weight":
                target, source = dotted_name(node.targets[0]), dotted_name(node.value)
                if _is_weight_of_self(target) and _is_weight_of_self(source):
                    found.append(WeightTie(target[5:], source[5:], conditions))  # type: ignore[index]
        elif isinstance(node, ast.If):
            known = _parameter_test(node.test, parameters)
            inside = (*conditions, known) if known else conditions
            otherwise = (*conditions, (known[0], not known[1])) if known else conditions
            stack.extend((s, otherwise) for s in reversed(node.orelse))
            stack.extend((s, inside) for s in reversed(node.body))
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend((s, conditions) for s in reversed(_child_statements(node)))
    return tuple(found)


# A tie a construction makes: (target, source), and when it depends on a value known only
# at run time, the guards it needs: (the argument's expression at the construction, or
# None for a default that is not a literal; the truth that ties).
Tie = tuple[str, str] | tuple[str, str, tuple[tuple[ast.expr | None, bool], ...]]


def ties_made_by(call: ast.Call | None, cls: ast.ClassDef, ties: tuple[WeightTie, ...]) -> tuple[Tie, ...]:
    """The ties ``call`` (``Cls(...)``) may make: those whose conditions its arguments
    (or the defaults) do not rule out with a literal. A tie whose condition is not a
    literal there (``Cls(..., args.tied)``) carries the guard that decides it. Without
    the call (a model built by a class method), every condition is unknown."""
    init = _init_of(cls)
    made: list[Tie] = []
    for tie in ties:
        guards: list[tuple[ast.expr | None, bool]] = []
        for parameter, truth in tie.conditions if init is not None else ():
            given, value = _init_argument(call, init, parameter) if call is not None else (None, _UNKNOWN)  # type: ignore[arg-type]
            if value is _UNKNOWN:
                guards.append((given, truth))
            elif bool(value) is not truth:
                break
        else:
            made.append((tie.target, tie.source, tuple(guards)) if guards else (tie.target, tie.source))
    return tuple(made)


def _init_of(cls: ast.ClassDef) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    inits = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__"]
    return inits[-1] if inits else None


def _parameter_test(test: ast.expr, parameters: set[str]) -> tuple[str, bool] | None:
    """``if p:`` -> (p, True), ``if not p:`` -> (p, False), for a parameter ``p``."""
    if isinstance(test, ast.Name) and test.id in parameters:
        return test.id, True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _parameter_test(test.operand, parameters)
        return (inner[0], not inner[1]) if inner else None
    return None


def _child_statements(node: ast.stmt) -> list[ast.stmt]:
    found: list[ast.stmt] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            found.append(child)
        elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
            found.extend(child.body)
    return found


_UNKNOWN = object()


def _init_argument(
    call: ast.Call, init: ast.FunctionDef | ast.AsyncFunctionDef, parameter: str
) -> tuple[ast.expr | None, object]:
    """The expression ``call`` gives ``init``'s ``parameter`` (None: the default, or
    unknown), and its literal value (or the default's), else ``_UNKNOWN``."""
    given = keyword_value(call, parameter)
    if given is None:
        positional = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]  # after self
        if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
            return None, _UNKNOWN  # `**options`, `*args`: anything may be given
        if parameter in positional and positional.index(parameter) < len(call.args):
            given = call.args[positional.index(parameter)]
        else:
            default = _default(init, parameter)
            return None, default.value if isinstance(default, ast.Constant) else _UNKNOWN
    return given, given.value if isinstance(given, ast.Constant) else _UNKNOWN


def _default(init: ast.FunctionDef | ast.AsyncFunctionDef, parameter: str) -> ast.expr | None:
    args = init.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    return defaults.get(parameter)


def same_object_tree(a: str, b: str) -> bool:
    """``a`` and ``b`` name the same object, or one is an attribute path into the other
    (moving ``model`` moves ``model.encoder``'s parameters)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _is_weight_of_self(name: str | None) -> bool:
    return bool(name) and name.startswith("self.") and name.endswith(".weight") and name.count(".") >= 2  # type: ignore[union-attr]


def _is_name(target: ast.AST, name: str) -> bool:
    return isinstance(target, ast.Name) and target.id == name


def _matches(name: str):
    return lambda target: dotted_name(target) == name


def _argument(call: ast.Call, parameter: str, positional: list[str]) -> ast.expr | None:
    value = keyword_value(call, parameter)
    if value is None and parameter in positional:
        index = positional.index(parameter)
        if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            value = call.args[index]
    return value


def _position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next((stmt for stmt in cls.body if isinstance(stmt, FUNCTIONS) and stmt.name == name), None)


def _unmoved(value: ast.expr) -> ast.expr:
    """``Wrapper(model)`` for ``Wrapper(model).to(dev)``."""
    while isinstance(value, ast.Call) and method_name(value) in MOVES:
        value = value.func.value  # type: ignore[attr-defined]
    return value


# The last part of a base class name that makes a class of another module an ``nn.Module``
# (its imports are not resolved here: `nn.Module`, `torch.nn.Module`, `LightningModule`).
MODULE_BASE_NAMES = frozenset({"Module", "LightningModule", "PreTrainedModel"})


def _subclasses_a_module(cls: ast.ClassDef) -> bool:
    """A class of a local module whose base is spelled as an ``nn.Module``."""
    return any((dotted_name(base) or "").rsplit(".", 1)[-1] in MODULE_BASE_NAMES for base in cls.bases)


def _end(node: ast.AST) -> tuple[int, int]:
    return node.end_lineno or node.lineno, node.end_col_offset or 0  # type: ignore[attr-defined]


def _receiving(call: ast.Call, function: ast.FunctionDef | ast.AsyncFunctionDef, names: set[str]) -> set[str]:
    """The parameters of ``function`` that ``call`` passes one of ``names``."""
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    if positional and positional[0] in ("self", "cls") and enclosing(function, ast.ClassDef) is not None:
        positional = positional[1:]
    return {
        parameter
        for parameter in (*positional, *(a.arg for a in function.args.kwonlyargs))
        if (argument := passed_argument(call, function, parameter)) is not None and dotted_name(argument) in names
    }


def _returned_positions(value: ast.expr, names: set[str]) -> set[int | None]:
    """Where a returned value holds one of ``names``: None for the whole value, the index
    for an item of a returned tuple."""
    if dotted_name(value) in names:
        return {None}
    if isinstance(value, ast.Tuple) and not any(isinstance(item, ast.Starred) for item in value.elts):
        return {index for index, item in enumerate(value.elts) if dotted_name(item) in names}
    return set()


def _unpacked(target: ast.expr, positions: set[int | None]) -> set[str]:
    """The names an assignment target binds to the returned value's ``positions``."""
    if None in positions and isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(t, ast.Starred) for t in target.elts):
        return {
            name
            for index, item in enumerate(target.elts)
            if index in positions and (name := dotted_name(item)) is not None
        }
    return set()


def _assigned_name(statement: ast.stmt, value: ast.expr) -> str | None:
    if isinstance(statement, ast.Assign) and statement.value is value and len(statement.targets) == 1:
        return dotted_name(statement.targets[0])
    if isinstance(statement, ast.AnnAssign) and statement.value is value:
        return dotted_name(statement.target)
    return None


def _binding(statement: ast.stmt, call: ast.Call) -> str | None:
    return _assigned_name(statement, call)


def _taken_before(receivers: list[ast.expr], statement: ast.stmt) -> tuple[ast.stmt, ...]:
    """The statements, in the function of ``statement`` and before it, of the
    ``.parameters()`` calls on ``receivers``, in source order."""
    function = enclosing_function(statement)
    built_at = (statement.lineno, statement.col_offset)
    around = {id(node) for node in ancestors(statement)}
    found: dict[int, ast.stmt] = {}
    for receiver in receivers:
        taken = enclosing_statement(receiver)
        if (
            taken is not None
            and taken is not statement
            and id(taken) not in around
            and (taken.lineno, taken.col_offset) < built_at
            and enclosing_function(taken) is function
        ):
            found[id(taken)] = taken
    return tuple(sorted(found.values(), key=lambda s: (s.lineno, s.col_offset)))
