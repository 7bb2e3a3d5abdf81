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
  the optimizers prepared in the *same* call at the new parameters);
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
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from xlalint.analysis.order import is_optimizer_class
from xlalint.analysis.semantic import (
    ancestors,
    dotted_name,
    enclosing_function,
    enclosing_statement,
    keyword_value,
    method_name,
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
)

if TYPE_CHECKING:
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


class TrainingObjects:
    """The models, optimizers and model moves of one module, computed on first use."""

    def __init__(self, semantic: Semantic, project: ProjectView | None = None):
        self.semantic = semantic
        #: The local modules the module imports (``from model import Transformer``), if known.
        self.project = project
        self._device_names: dict[tuple[int, str], bool] = {}
        self._held_models: dict[int, list[ast.expr]] = {}

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
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and method_name(node) in PARAMETER_METHODS:
                found.append(node.func.value)  # type: ignore[attr-defined]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and depth < _MAX_DEPTH:
                if id(node) in seen:
                    continue
                seen.add(id(node))
                for value in self._values_of(node):
                    found.extend(self._receivers_in(value, depth + 1, seen))
        return found

    def _values_of(self, name: ast.Name) -> list[ast.expr]:
        for scope in enclosing_scopes(name):
            values = list(assigned_values(scope, lambda t, n=name.id: _is_name(t, n), shallow=True))
            if values:
                return values
        return []

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
    def is_xla_device(self, expr: ast.AST | None, depth: int = 0) -> bool:
        """``expr`` is the XLA device: ``torch_xla.device()``, ``xm.xla_device()``,
        ``"xla"``, ``torch.device("xla")``, or a variable, ``self.<attr>`` or function
        parameter that holds one."""
        if expr is None or depth > _MAX_DEPTH:
            return False
        text = string_value(expr)
        if text is not None:
            return text == "xla" or text.startswith("xla:")
        if isinstance(expr, ast.Call):
            name = self.semantic.call_name(expr)
            if name in XLA_DEVICE_CALLS:
                return True
            return name in TORCH_DEVICE and bool(expr.args) and self.is_xla_device(expr.args[0], depth + 1)
        if isinstance(expr, ast.Name):
            # Many `.to(device)` calls ask about one `device`: answered once per scope.
            key = (id(enclosing_function(expr)), expr.id)
            known = self._device_names.get(key)
            if known is None:
                known = self._device_names[key] = self._name_is_xla_device(expr, depth)
            return known
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = enclosing(expr, ast.ClassDef)
            if cls is not None:
                values = assigned_values(cls, lambda t, a=expr.attr: is_self_attr(t, a))
                return any(self.is_xla_device(v, depth + 1) for v in values)
        return False

    def _name_is_xla_device(self, expr: ast.Name, depth: int) -> bool:
        for scope in enclosing_scopes(expr):
            values = list(assigned_values(scope, lambda t, n=expr.id: _is_name(t, n), shallow=True))
            if values:
                return any(self.is_xla_device(v, depth + 1) for v in values)
            if isinstance(scope, FUNCTIONS) and expr.id in parameter_names(scope):
                return self._passed_xla_device(scope, expr.id, depth)
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

    def _passed_xla_device(self, function: ast.AST, parameter: str, depth: int) -> bool:
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]  # type: ignore[attr-defined]
        if positional and positional[0] in ("self", "cls") and enclosing(function, ast.ClassDef) is not None:
            positional = positional[1:]
        sites = list(call_sites(function, self.semantic))  # type: ignore[arg-type]
        cls = enclosing(function, ast.ClassDef)
        if function.name == "__init__" and cls is not None:  # type: ignore[attr-defined]
            # `Trainer(model, device)` calls `__init__`.
            sites = [c for c in self.semantic.calls if isinstance(c.func, ast.Name) and c.func.id == cls.name]  # type: ignore[attr-defined]
        return bool(sites) and all(
            self.is_xla_device(_argument(site, parameter, positional), depth + 1) for site in sites
        )

    @cached_property
    def moves(self) -> list[Move]:
        """Every move of a named object to the XLA device (a model or not: callers match
        the names they know to be models)."""
        found: list[Move] = []
        for call in self.semantic.calls_of("to", ACCELERATE_PREPARE):
            name = method_name(call)
            if name == "to":
                if not self._may_name_xla_device:
                    continue
                device = call.args[0] if call.args else keyword_value(call, "device")
                if not self.is_xla_device(device):
                    continue
                move = self._to_move(call)
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
        if name is not None and (target is None or target == name):
            return [Move(call, statement, name, "to")]
        if target is not None:
            # `model = Net().to(dev)`: the new model is on the device from the start.
            return [Move(call, statement, target, "to")]
        return []

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
        it is part of, or of a part of it."""
        return [m for m in self.moves if enclosing_function(m.statement) is scope and same_object_tree(model, m.model)]

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
