"""The parallelism a file uses (docs/rules.md, "Scope" and "The rules of today's torch_xla").

- *multi-process*: the file is a multi-process XLA script (``xlalint.analysis.scripts``):
  one process per device, each with its own copy of the model;
- *DDP*: the model is wrapped in ``DistributedDataParallel`` (it all-reduces in backward);
- *XLA FSDP*: the model is wrapped in ``XlaFullyShardedDataParallel`` (it reduce-scatters
  the gradients in backward and each process holds a shard of the parameters);
- *SPMD FSDPv2*: ``SpmdFullyShardedDataParallel``, FSDP written with SPMD sharding (its
  parameters are global tensors);
- *SPMD*: the file calls ``xr.use_spmd()``: one process drives every device of the host,
  and ``xr.world_size()`` is 1 (torch_xla 2.9 ``runtime.world_size``).

Rules ask these facts instead of matching the wrappers themselves: XLA203 and XLA106
must not make a process reduce gradients that FSDP or SPMD already made global, XLA209
and XLA210 report the per-process APIs used there. Which FSDP model an optimizer holds
is asked of ``xlalint.analysis.training_objects`` (the optimizers and the models whose
parameters they hold).

Built once per module on first use (``Context.parallelism``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from xlalint.analysis.reaching import opposite_branches, reaching_values, runs_before
from xlalint.analysis.scripts import SPAWN, is_multiprocess_xla_script
from xlalint.analysis.semantic import Semantic, ancestors, dotted_name, keyword_value, parent
from xlalint.analysis.steps import mutually_exclusive
from xlalint.analysis.training_objects import TrainingObjects
from xlalint.analysis.values import (
    FUNCTIONS,
    call_sites,
    parameter_names,
    passed_argument,
)

USE_SPMD = frozenset({"torch_xla.runtime.use_spmd"})


class WrapKind(Enum):
    DDP = "DistributedDataParallel"
    TORCH_FSDP = "torch FSDP"
    XLA_FSDP = "XlaFullyShardedDataParallel"
    SPMD_FSDP = "SpmdFullyShardedDataParallel"
    MP_MODEL_WRAPPER = "MpModelWrapper"


# The model wrappers, by where torch/torch_xla 2.9 define (and re-export) them.
WRAPPERS: dict[str, WrapKind] = {
    "torch.nn.parallel.DistributedDataParallel": WrapKind.DDP,
    "torch.nn.parallel.distributed.DistributedDataParallel": WrapKind.DDP,
    "torch.distributed.fsdp.FullyShardedDataParallel": WrapKind.TORCH_FSDP,
    "torch.distributed.fsdp.fully_shard": WrapKind.TORCH_FSDP,
    "torch.distributed._composable.fsdp.fully_shard": WrapKind.TORCH_FSDP,
    "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel": WrapKind.XLA_FSDP,
    "torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel": WrapKind.XLA_FSDP,
    "torch_xla.experimental.spmd_fully_sharded_data_parallel.SpmdFullyShardedDataParallel": WrapKind.SPMD_FSDP,
    "torch_xla.distributed.spmd.SpmdFullyShardedDataParallel": WrapKind.SPMD_FSDP,
    "torch_xla.distributed.xla_multiprocessing.MpModelWrapper": WrapKind.MP_MODEL_WRAPPER,
}
XLA_FSDP_KINDS = frozenset({WrapKind.XLA_FSDP, WrapKind.SPMD_FSDP})
_MAX_DEPTH = 4


@dataclass(frozen=True)
class Wrap:
    """A model wrapped for parallel training: ``model = FSDP(net, ...)``."""

    call: ast.Call
    kind: WrapKind
    #: The module given to the wrapper (first argument or ``module=``), if any.
    module: ast.expr | None
    #: What the wrapped model is assigned to (``model``, ``self.model``), if anything.
    target: str | None


class ParallelismAnalysis:
    """The parallelism facts of one module, computed on first use."""

    def __init__(self, semantic: Semantic, training_objects: TrainingObjects):
        self.semantic = semantic
        #: Which optimizers the module builds and whose parameters they hold.
        self.training_objects = training_objects

    # -- the kind of script ----------------------------------------------------------------
    @cached_property
    def multiprocess(self) -> bool:
        """A multi-process XLA script (docs/rules.md, "Scope"), SPMD or not."""
        return is_multiprocess_xla_script(self.semantic)

    @cached_property
    def launches(self) -> list[ast.Call]:
        """``xmp.spawn(...)`` / ``torch_xla.launch(...)``: the file starts its workers."""
        return self._calls_to(SPAWN)

    @cached_property
    def use_spmd_calls(self) -> list[ast.Call]:
        return self._calls_to(USE_SPMD)

    def _calls_to(self, names: frozenset[str]) -> list[ast.Call]:
        """The calls of the qualified ``names``, through the index of calls by their own
        name that the rules share (``Semantic.calls_of``)."""
        candidates = self.semantic.calls_of(*{name.rsplit(".", 1)[-1] for name in names})
        return [call for call in candidates if self.semantic.call_name(call) in names]

    @property
    def spmd(self) -> bool:
        """``xr.use_spmd()``: one process drives every device."""
        return bool(self.use_spmd_calls)

    def spmd_at(self, node: ast.AST) -> ast.Call | None:
        """The ``xr.use_spmd()`` call that puts ``node`` under SPMD: one that is not in the
        other branch of an ``if`` (``if args.spmd: xr.use_spmd() else: xmp.spawn(...)``)."""
        return next((c for c in self.use_spmd_calls if not mutually_exclusive(c, node)), None)

    # -- model wrappers ------------------------------------------------------------------
    @cached_property
    def wraps(self) -> list[Wrap]:
        found = []
        for call in self._calls_to(frozenset(WRAPPERS)):
            kind = WRAPPERS[self.semantic.call_name(call)]  # type: ignore[index]
            module = call.args[0] if call.args else keyword_value(call, "module")
            found.append(Wrap(call, kind, module, _assigned_to(call)))
        return found

    def wrapped(self, *kinds: WrapKind) -> list[Wrap]:
        return [w for w in self.wraps if w.kind in kinds]

    @property
    def wraps_model(self) -> bool:
        """DDP, FSDP or ``MpModelWrapper`` keep the processes' models in step."""
        return bool(self.wraps)

    @property
    def ddp(self) -> bool:
        return bool(self.wrapped(WrapKind.DDP))

    @property
    def xla_fsdp(self) -> bool:
        """torch_xla's FSDP, either form (``XlaFullyShardedDataParallel`` or FSDPv2)."""
        return bool(self.wrapped(*XLA_FSDP_KINDS))

    @property
    def gradients_not_per_process(self) -> bool:
        """XLA FSDP reduces the gradients in backward and SPMD computes global ones: a
        per-process all-reduce (``xm.optimizer_step``, ``xm.reduce_gradients``) is wrong
        here (XLA209, XLA210), so XLA203 and XLA106 never suggest one."""
        return self.spmd or self.xla_fsdp

    def fsdp_wrap_of(self, model: ast.expr | None, depth: int = 0) -> Wrap | None:
        """The torch_xla FSDP wrap that ``model`` (a name or ``self.<attr>``) holds: one
        assigned to it, or, for a function parameter, the one every call site passes.
        Where the assignments that reach a name are known (``reaching``), every one of
        them must wrap it: ``if args.use_fsdp: model = FSDP(model)`` wraps the model
        under that test only, and in the ``else`` of the same test not at all."""
        name = dotted_name(model) if model is not None else None
        if name is None or depth > _MAX_DEPTH:
            return None
        if isinstance(model, ast.Name) and isinstance(model.ctx, ast.Load):
            reached = reaching_values(model)
            if reached is not None:
                wraps = [self._fsdp_wrap_assigned(value, name, depth) for value in reached]
                return wraps[0] if wraps and all(wraps) else None
        for wrap in self.wrapped(*XLA_FSDP_KINDS):
            # `self.model = FSDP(self.model)` under `if args.use_fsdp:` in `__init__` does
            # not hold in the `else` of a method's own `if args.use_fsdp:`.
            if (
                wrap.target == name
                and _same_scope(wrap.call, model)  # type: ignore[arg-type]
                and not opposite_branches(wrap.call, model)  # type: ignore[arg-type]
            ):
                return wrap
        function = _scope(model)  # type: ignore[arg-type]
        if isinstance(model, ast.Name) and isinstance(function, FUNCTIONS) and name in parameter_names(function):
            passed = [passed_argument(site, function, name) for site in call_sites(function, self.semantic)]
            wraps = [self.fsdp_wrap_of(value, depth + 1) for value in passed]
            if wraps and all(wraps):
                return wraps[0]
        return None

    def _fsdp_wrap_assigned(self, value: ast.expr, name: str, depth: int) -> Wrap | None:
        """The FSDP wrap a value assigned to ``name`` is: the wrap itself
        (``FSDP(net)``, ``FSDP(net).to(device)``), or a call on or of the same model
        (``model.to(device)``, ``torch.compile(model)``) of a model that holds one."""
        wrap = self._wraps_by_value.get(id(value))
        if wrap is not None:
            return wrap if wrap.kind in XLA_FSDP_KINDS else None
        if isinstance(value, ast.Call):
            receiver = value.func.value if isinstance(value.func, ast.Attribute) else None
            for operand in (receiver, *value.args):
                if isinstance(operand, ast.Name) and operand.id == name:
                    return self.fsdp_wrap_of(operand, depth + 1)
        return None

    @cached_property
    def _wraps_by_value(self) -> dict[int, Wrap]:
        """The wraps by the expression an assignment binds (``FSDP(net).to(device)``)."""
        found = {}
        for wrap in self.wraps:
            node: ast.AST = wrap.call
            while isinstance(parent(node), ast.Attribute) and isinstance(parent(parent(node)), ast.Call):
                node = parent(parent(node))  # type: ignore[assignment]
            found[id(node)] = wrap
        return found

    # -- which FSDP model an optimizer holds ----------------------------------------------
    def fsdp_model_of_optimizer(self, optimizer: ast.expr | None) -> Wrap | None:
        """The torch_xla FSDP wrap whose parameters ``optimizer`` (a name or ``self.<attr>``)
        holds. An optimizer this file does not build in sight (a function parameter)
        counts as the FSDP model's when every optimizer the file builds is an FSDP model's."""
        objects = self.training_objects
        constructions = (
            objects.optimizer_calls_of(optimizer) or self._passed_optimizers(optimizer) or objects.optimizer_calls
        )
        wraps = [self._fsdp_wrap_of_construction(c) for c in constructions]
        return wraps[0] if wraps and all(wraps) else None

    def _passed_optimizers(self, optimizer: ast.expr | None) -> list[ast.Call]:
        """For a parameter of a function, the optimizers its call sites pass (all of them
        known), else none."""
        function = _scope(optimizer) if isinstance(optimizer, ast.Name) else None
        if not isinstance(function, FUNCTIONS) or optimizer.id not in parameter_names(function):  # type: ignore[union-attr]
            return []
        found: list[ast.Call] = []
        for site in call_sites(function, self.semantic):
            passed = self.training_objects.optimizer_calls_of(passed_argument(site, function, optimizer.id))  # type: ignore[union-attr]
            if not passed:
                return []
            found += passed
        return found

    def optimizers_built_before(self, wrap: Wrap) -> list[ast.Call]:
        """Optimizers built from the parameters of the module ``wrap`` wraps, before it in
        the same function (or class): they hold the parameters FSDP replaces with its
        shards. "Before" follows the calls (``reaching.runs_before``): a wrap in a helper
        that ``__init__`` calls before it builds the optimizer comes first."""
        names = {dotted_name(wrap.module) if wrap.module is not None else None, wrap.target} - {None}
        found = []
        for construction in self.training_objects.optimizer_calls:
            if _scope(construction) is not _scope(wrap.call):
                continue
            before = runs_before(construction, wrap.call, self.semantic)
            if before is None:  # no function of the module seen to run both: by position
                before = (construction.lineno, construction.col_offset) < (wrap.call.lineno, wrap.call.col_offset)
            if before and any(dotted_name(m) in names for m in self.training_objects.held_models(construction)):
                found.append(construction)
        return found

    def _fsdp_wrap_of_construction(self, construction: ast.Call) -> Wrap | None:
        """The wrap of the models the optimizer built by ``construction`` holds: where it
        is built, or later (an optimizer built before the wrap steps the wrapped model:
        its ``xm.optimizer_step`` reduces the gradients again all the same)."""
        wraps = [self.fsdp_wrap_of(m) for m in self.training_objects.held_models(construction)]
        if wraps and all(wraps):
            return wraps[0]
        return self._wraps_after_construction.get(id(construction))

    @cached_property
    def _wraps_after_construction(self) -> dict[int, Wrap]:
        """Optimizer construction -> the first torch_xla FSDP wrap built after it from its
        model (``optimizers_built_before``), computed once."""
        found: dict[int, Wrap] = {}
        for wrap in self.wrapped(*XLA_FSDP_KINDS):
            for construction in self.optimizers_built_before(wrap):
                found.setdefault(id(construction), wrap)
        return found


def _assigned_to(call: ast.Call) -> str | None:
    """``model`` for ``model = FSDP(net)`` (also ``model = FSDP(net).to(device)``)."""
    node: ast.AST = call
    owner = parent(node)
    while isinstance(owner, ast.Attribute) and isinstance(parent(owner), ast.Call):
        node = parent(owner)  # type: ignore[assignment]
        owner = parent(node)
    if isinstance(owner, ast.Assign) and len(owner.targets) == 1 and owner.value is node:
        return dotted_name(owner.targets[0])
    if isinstance(owner, ast.AnnAssign) and owner.value is node:
        return dotted_name(owner.target)
    return None


def _same_scope(a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` read the same variable: the same function (``self.<attr>``: the
    same class), or ``a`` at module level."""
    scope_a = _scope(a)
    return scope_a is _scope(b) or isinstance(scope_a, (ast.Module, ast.ClassDef))


def _scope(node: ast.AST) -> ast.AST | None:
    for anc in ancestors(node):
        if isinstance(anc, ast.ClassDef):
            return anc
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            cls = parent(anc)
            return cls if isinstance(cls, ast.ClassDef) else anc
    return None
