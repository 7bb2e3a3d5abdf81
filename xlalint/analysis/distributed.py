"""The multi-process analysis (docs/rules.md, "Scope"): the facts about data parallelism that
XLA106, XLA202, XLA203, XLA204 and XLA301 share.

- is this a data-parallel script: a *multi-process XLA script* that is not an SPMD one
  (``xlalint.analysis.parallelism``) and does not leave its loop to a library;
- its *training* ``DataLoader``\\ s: the loaders whose batches a step loop iterates,
  followed through ``enumerate``/``tqdm``/``iter``, device loaders
  (``pl.MpDeviceLoader(loader, device)``, ``ParallelLoader(loader, ...).per_device_loader``),
  either arm of a conditional expression, variables (by the assignments that reach the
  read: ``reaching``), ``self.<attr>``, a same-module function that returns one, and function
  parameters filled at every call site (an ``__init__``'s at every construction of its class:
  ``Trainer(model, prepare_dataloader(ds))`` kept as ``self.train_data``); a loader a
  function of the module returns when a step loop of a script that imports it iterates
  what the function returns (``iterated_by_importers``; the calls a step loop iterates
  into another module are ``iterated_calls``); when no step loop is in sight (the loop
  is in another module), a loader bound to a name that says ``train``;
- the optimizer steps along each path through the step (``xlalint.analysis.order``) and
  whether the gradients are all-reduced before each, on each path;
- whether its optimizer reduces the gradients itself (ZeRO-1), or the script reduces
  gradients by hand (whether a wrapper keeps the models in step, DDP, FSDP,
  ``xmp.MpModelWrapper``, is ``xlalint.analysis.parallelism``'s).

Built once per module on first use (``Context.distributed``), like ``Context.steps``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from xlalint.analysis.order import STEPS, Event, EventFinder, Kind, Path, loop_paths
from xlalint.analysis.parallelism import ParallelismAnalysis
from xlalint.analysis.reaching import reaching_values
from xlalint.analysis.scripts import WORLD, calls_to, uses_syncing_library
from xlalint.analysis.semantic import Semantic, ancestors, dotted_name, keyword_value, method_name, parent
from xlalint.analysis.steps import ITERATOR_WRAPPERS, MP_DEVICE_LOADER, PARALLEL_LOADER, StepAnalysis
from xlalint.analysis.values import (
    FUNCTIONS,
    assigned_values,
    call_sites,
    enclosing,
    enclosing_scopes,
    is_self_attr,
    parameter_names,
    passed_argument,
    unpacked_items,
    walk_scope,
)
from xlalint.model import Import

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
DISTRIBUTED_SAMPLER = "torch.utils.data.distributed.DistributedSampler"
DISTRIBUTED_SAMPLERS = frozenset({DISTRIBUTED_SAMPLER, "torch.utils.data.DistributedSampler"})
# Optimizers whose `step()` reduce-scatters the gradients itself (ZeRO-1 shards the
# optimizer state): `opt.step()` on one is the right call.
REDUCING_OPTIMIZERS = frozenset({"torch_xla.distributed.zero_redundancy_optimizer.ZeroRedundancyOptimizer"})
# Names under which scripts call their own (or a library's) gradient all-reduce.
_REDUCING_NAME = re.compile(r"all_?reduce|reduce_grad|sync_grad|average_grad|allreduce", re.IGNORECASE)
_TRAIN_NAME = re.compile(r"train", re.IGNORECASE)
_EVAL_NAME = re.compile(r"eval|valid|val_|_val|test|dev_|_dev|predict|infer", re.IGNORECASE)
_MAX_DEPTH = 8


@dataclass(frozen=True)
class TrainingLoader:
    """A ``DataLoader(...)`` call whose batches the training loop consumes."""

    call: ast.Call
    #: The dataset argument (first positional or ``dataset=``), if given.
    dataset: ast.expr | None


@dataclass(frozen=True)
class OptimizerStep:
    """An optimizer step of the step (``opt.step()``, ``scaler.step(opt)``,
    ``xm.optimizer_step(opt)``) and the paths through the step that reach it."""

    event: Event
    paths: tuple[Path, ...]
    #: The paths on which the gradients reach this step without an all-reduce.
    unreduced: tuple[Path, ...]

    @property
    def reduced_somewhere(self) -> bool:
        return len(self.unreduced) < len(self.paths)

    def last_backward(self) -> Event | None:
        """The backward that produced the gradients this step uses, if every path agrees."""
        found = {id(b): b for p in self.paths if (b := p.last_backward_before(p.index(_same(p, self.event))))}
        return next(iter(found.values())) if len(found) == 1 else None


def _same(path: Path, event: Event) -> Event:
    return next(e for e in path if e == event)


class DistributedAnalysis:
    """The multi-process facts of one module, computed on first use."""

    def __init__(
        self,
        semantic: Semantic,
        step_analysis: Callable[[], StepAnalysis],
        parallelism: ParallelismAnalysis,
        iterated_by_importers: tuple[str, ...] = (),
    ):
        """``step_analysis``: gives the module's step analysis, asked only by the facts
        that need it (most rules ask only which calls the file makes).
        ``iterated_by_importers``: the module-level functions of this module whose
        results a step loop of an XLA script that imports it iterates (what that
        script's check found: ``engine/follow.py``)."""
        self.semantic = semantic
        self._step_analysis = step_analysis
        self.parallelism = parallelism
        self.iterated_by_importers = iterated_by_importers

    @property
    def steps(self) -> StepAnalysis:
        return self._step_analysis()

    # -- the script -----------------------------------------------------------------------
    @cached_property
    def uses_xla(self) -> bool:
        return self.semantic.imports.imports_module("torch_xla")

    @cached_property
    def data_parallel(self) -> bool:
        """One process per device, each with its own model, data and gradients: a
        multi-process XLA script that is not SPMD and does not leave the loop to a
        library (HF Trainer, accelerate), which shards and reduces for it."""
        parallelism = self.parallelism
        return parallelism.multiprocess and not parallelism.spmd and not uses_syncing_library(self.semantic)

    @cached_property
    def optimizer_reduces(self) -> bool:
        """The script builds an optimizer that reduces the gradients in its own ``step()``
        (torch_xla's ``ZeroRedundancyOptimizer``)."""
        return bool(calls_to(self.semantic, REDUCING_OPTIMIZERS))

    @cached_property
    def reduces_by_hand(self) -> bool:
        """A call whose name says it all-reduces gradients that the path analysis does not
        model (``dist.all_reduce(p.grad)``, a helper from another module): the script
        takes care of the reduction somewhere, so XLA203 stays quiet."""
        candidates = [
            call
            for name, calls in self.semantic.calls_by_function.items()
            if _REDUCING_NAME.search(name)
            for call in calls
        ]
        for call in candidates:
            qualified = self.semantic.call_name(call)
            if qualified is not None and qualified.startswith("torch_xla."):
                continue  # the path analysis knows torch_xla's own reductions
            if qualified is not None and not mentions_gradients(call):
                continue  # `dist.all_reduce(loss)`: averaging a metric
            return True
        return False

    # -- the step: events and paths -------------------------------------------------------
    @cached_property
    def finder(self) -> EventFinder:
        return EventFinder(self.semantic)

    @cached_property
    def loop_paths(self) -> list[tuple[ast.AST, list[Path]]]:
        """For every step loop, the paths through one iteration (``order.loop_paths``)."""
        return loop_paths(self.semantic, self.steps, self.finder)

    @cached_property
    def optimizer_steps(self) -> list[OptimizerStep]:
        """Every optimizer step of the step, with the paths that reach it and those on
        which no all-reduce of the gradients comes before it (since the backward)."""
        found: dict[Event, tuple[list[Path], list[Path]]] = {}
        for _loop, paths in self.loop_paths:
            for path in paths:
                for i, event in enumerate(path):
                    if event.kind not in STEPS:
                        continue
                    reaching, unreduced = found.setdefault(event, ([], []))
                    reaching.append(path)
                    if not event.reduces and not path.before(i, Kind.ALL_REDUCE):
                        unreduced.append(path)
        steps = [OptimizerStep(event, tuple(p), tuple(u)) for event, (p, u) in found.items()]
        return sorted(steps, key=lambda s: (s.event.call.lineno, s.event.call.col_offset))

    # -- the training data ------------------------------------------------------------------
    @cached_property
    def dataloaders(self) -> list[ast.Call]:
        return [c for c in self.semantic.calls_of("DataLoader") if self.semantic.call_name(c) in DATALOADERS]

    @cached_property
    def training_loaders(self) -> list[TrainingLoader]:
        """The ``DataLoader`` calls whose batches a step loop iterates (also a loop of a
        script that imports this module, through the functions it names:
        ``iterated_by_importers``); when the module has no step loop, also those bound
        to a name that says ``train`` (and not ``eval``)."""
        if not self.dataloaders:
            return []
        loops, iterated = self._iterated
        chosen = [c for c in self.dataloaders if id(c) in iterated or (not loops and _named_for_training(c))]
        return [TrainingLoader(call, _dataset_argument(call)) for call in chosen]

    @cached_property
    def iterated_calls(self) -> list[ast.Call]:
        """The calls whose results a step loop iterates and whose function is neither
        one of this module nor a loader this analysis knows (``prepare_dataloader(32)``
        imported from ``data.py``): where the training batches come from another module.
        The engine tells that module (``engine/follow.py``), whose loaders are then
        training loaders (``iterated_by_importers``)."""
        _loops, iterated = self._iterated
        return [
            call
            for call in iterated.values()
            if self.semantic.call_name(call) not in DATALOADERS and self.steps.resolve(call) is None
        ]

    @cached_property
    def _iterated(self) -> tuple[list[ast.AST], dict[int, ast.Call]]:
        """The step loops, and the calls (``DataLoader(...)`` and the calls to
        functions not of this module) whose results they iterate, by id: followed once
        from every loop and every function the importers iterate the results of."""
        loops = list({id(loop.node): loop.node for loop in self.steps.loops}.values())
        loops += [loop for loop, _paths in self.loop_paths if all(loop is not known for known in loops)]
        iterated: dict[int, ast.Call] = {}
        # One record of what was followed for every loop: each expression is followed
        # again only from a shallower depth (at most _MAX_DEPTH times), so many loops
        # over the same `self.train_data` filled at many constructions stay linear.
        seen: dict[int, int] = {}
        for loop in loops:
            for source in self._loop_sources(loop):
                for call in self._loaders_of(source, 0, seen):
                    iterated[id(call)] = call
        for function in self.functions_iterated_by_importers:
            for node in walk_scope(function, shallow=True):
                if isinstance(node, ast.Return):
                    for call in self._loaders_of(node.value, 1, seen):
                        iterated[id(call)] = call
        return loops, iterated

    @cached_property
    def functions_iterated_by_importers(self) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The module-level functions named by ``iterated_by_importers`` (the last
        definition of each, as an import binds it). A name told that the module does not
        define may be one it imports (a package's ``__init__.py`` re-exporting it)."""
        if not self.iterated_by_importers:
            return []
        wanted = set(self.iterated_by_importers)
        found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for node in self.semantic.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):
            if node.name in wanted and isinstance(parent(node), ast.Module):  # type: ignore[attr-defined]
                found[node.name] = node  # type: ignore[attr-defined]
        return list(found.values())

    def _loop_sources(self, loop: ast.AST) -> Iterator[ast.expr]:
        """What a step loop takes its batches from: the ``for`` iterable, and ``next(it)``
        calls in its body (a ``while`` loop over an iterator)."""
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            yield loop.iter
        for call in self._next_calls_by_loop.get(id(loop), ()):
            yield call.args[0]
        # The step loop may be the inner loop of an epoch loop fed by another step loop's
        # body; its helpers' loops are found as step loops of their own.

    @cached_property
    def _next_calls_by_loop(self) -> dict[int, list[ast.Call]]:
        """Loop -> the ``next(it)`` calls inside it (at any depth), found once: a scan of
        every ``next`` call per loop was quadratic in a file of many loops."""
        found: dict[int, list[ast.Call]] = {}
        for call in self.semantic.calls_of("next"):
            if isinstance(call.func, ast.Name) and call.args:
                for anc in ancestors(call):
                    if isinstance(anc, (ast.For, ast.AsyncFor, ast.While)):
                        found.setdefault(id(anc), []).append(call)
        return found

    def _loaders_of(self, expr: ast.AST | None, depth: int, seen: dict[int, int]) -> Iterator[ast.Call]:
        """The ``DataLoader`` calls whose batches iterating ``expr`` yields, and the
        calls to functions not of this module whose results it iterates (``seen``: the
        expressions followed so far, with the least depth they were followed from)."""
        if expr is None or depth > _MAX_DEPTH or seen.get(id(expr), _MAX_DEPTH + 1) <= depth:
            return
        seen[id(expr)] = depth
        semantic = self.semantic
        if isinstance(expr, ast.Call):
            name = semantic.call_name(expr)
            if name in DATALOADERS:
                yield expr
                return
            if name in MP_DEVICE_LOADER or name in PARALLEL_LOADER:
                source = expr.args[0] if expr.args else keyword_value(expr, "loader")
                yield from self._loaders_of(source, depth + 1, seen)
                return
            if method_name(expr) == "per_device_loader":
                yield from self._loaders_of(expr.func.value, depth + 1, seen)  # type: ignore[attr-defined]
                return
            func = dotted_name(expr.func) or ""
            if func.rsplit(".", 1)[-1] in ITERATOR_WRAPPERS or func == "next":
                for arg in expr.args:
                    yield from self._loaders_of(arg, depth + 1, seen)
                return
            function = self.steps.resolve(expr) if name is None else None
            if function is None:
                # A function of another module (or unknown): what it returns is not
                # followed here; the call is kept (``iterated_calls``).
                yield expr
                return
            for node in walk_scope(function, shallow=True):
                if isinstance(node, ast.Return):
                    yield from self._loaders_of(node.value, depth + 1, seen)
            return
        if isinstance(expr, ast.IfExp):
            # `pl.MpDeviceLoader(loader, device) if on_xla else loader`: either arm.
            yield from self._loaders_of(expr.body, depth + 1, seen)
            yield from self._loaders_of(expr.orelse, depth + 1, seen)
            return
        if isinstance(expr, ast.Name):
            reached = reaching_values(expr) if isinstance(expr.ctx, ast.Load) else None
            if reached is not None:
                # Program order: a name reassigned to an evaluation loader after the
                # training loop holds the training loader where the loop reads it.
                for value in reached:
                    yield from self._loaders_of(value, depth + 1, seen)
                    # `loader = accelerator.prepare(loader)`: the call may hand back the
                    # loader it is given under the same name.
                    if isinstance(value, ast.Call):
                        for operand in (*value.args, *(k.value for k in value.keywords)):
                            if isinstance(operand, ast.Name) and operand.id == expr.id:
                                yield from self._loaders_of(operand, depth + 1, seen)
                return
            for scope in enclosing_scopes(expr):
                values = list(
                    assigned_values(scope, lambda t, n=expr.id: isinstance(t, ast.Name) and t.id == n, shallow=True)
                )
                for value in values:
                    yield from self._loaders_of(value, depth + 1, seen)
                # `train_loader, val_loader = make_loaders()`: the item of what it returns.
                items = list(unpacked_items(scope, expr.id, shallow=True))
                for value, index in items:
                    yield from self._returned_items(value, index, depth + 1, seen)
                values += [value for value, _ in items]
                if isinstance(scope, FUNCTIONS) and expr.id in parameter_names(scope):
                    yield from self._parameter_loaders(scope, expr.id, depth, seen)
                    return
                if values:
                    return
            return
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = enclosing(expr, ast.ClassDef)
            if cls is not None:
                for value in assigned_values(cls, lambda t, a=expr.attr: is_self_attr(t, a)):
                    yield from self._loaders_of(value, depth + 1, seen)

    def _returned_items(self, value: ast.expr, index: int, depth: int, seen: dict[int, int]) -> Iterator[ast.Call]:
        """The loaders item ``index`` of ``value`` holds, when ``value`` calls a function
        of the module that returns a tuple (``return DataLoader(...), DataLoader(...)``)."""
        function = self.steps.resolve(value) if isinstance(value, ast.Call) else None
        if function is None or depth > _MAX_DEPTH:
            return
        for node in walk_scope(function, shallow=True):
            if isinstance(node, ast.Return) and isinstance(node.value, (ast.Tuple, ast.List)):
                items = node.value.elts
                if index < len(items) and not any(isinstance(item, ast.Starred) for item in items[: index + 1]):
                    yield from self._loaders_of(items[index], depth + 1, seen)

    def _parameter_loaders(self, func: ast.AST, param: str, depth: int, seen: dict[int, int]) -> Iterator[ast.Call]:
        """What the calls of ``func`` pass for ``param``: also the constructions of its
        class for an ``__init__`` (``Trainer(model, train_data, opt)`` then
        ``self.train_data = train_data``, iterated by a method)."""
        for call in call_sites(func, self.semantic, constructions=True):  # type: ignore[arg-type]
            yield from self._loaders_of(passed_argument(call, func, param), depth + 1, seen)  # type: ignore[arg-type]

    # -- sharding -----------------------------------------------------------------------------
    def sharded_by_hand(self, dataset: ast.expr | None) -> bool:
        """The dataset is split between the processes already: its name is bound to
        something that asks for the world size or ordinal, or shards
        (``ds.shard(num_shards=xr.world_size(), index=...)``, ``split_dataset_by_node``)."""
        if not isinstance(dataset, ast.Name):
            return dataset is not None and self._mentions_sharding(dataset)
        for scope in enclosing_scopes(dataset):
            values = list(
                assigned_values(scope, lambda t, n=dataset.id: isinstance(t, ast.Name) and t.id == n, shallow=True)
            )
            if values:
                return any(self._mentions_sharding(v) for v in values)
        return False

    def _mentions_sharding(self, expr: ast.expr) -> bool:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                name = self.semantic.call_name(node) or dotted_name(node.func) or ""
                last = name.rsplit(".", 1)[-1]
                if name in WORLD or last in ("shard", "split_dataset_by_node", "xrt_world_size", "get_ordinal"):
                    return True
        return False


class Spelling(Protocol):
    """What :func:`world_api` asks of the rule's context (``xlalint.engine.context``)."""

    @property
    def target_version(self) -> tuple[int, int]: ...

    def reference(
        self, qualified: str, preferred: str | None = None, at: ast.AST | None = None
    ) -> tuple[str, tuple[Import, ...]]: ...


def world_api(ctx: Spelling) -> tuple[str, str, tuple]:
    """How to write "the number of processes" and "this process's rank" for the target
    version: ``xr.world_size()``/``xr.global_ordinal()`` (torch_xla.runtime, 2.1+),
    ``xm.xrt_world_size()``/``xm.get_ordinal()`` before."""
    if ctx.target_version >= (2, 1):
        xr, imports = ctx.reference("torch_xla.runtime", "xr")
        return f"{xr}.world_size()", f"{xr}.global_ordinal()", imports
    xm, imports = ctx.reference("torch_xla.core.xla_model", "xm")
    return f"{xm}.xrt_world_size()", f"{xm}.get_ordinal()", imports


def mentions_gradients(call: ast.Call) -> bool:
    """An argument of ``call`` names gradients (``p.grad``, ``xm._fetch_gradients(opt)``)."""
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        for node in ast.walk(arg):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
            if "grad" in name.lower():
                return True
    return False


def _dataset_argument(call: ast.Call) -> ast.expr | None:
    return call.args[0] if call.args else keyword_value(call, "dataset")


def binding_name(call: ast.AST) -> str | None:
    """The name an expression is assigned to (``train_loader = DataLoader(...)``)."""
    owner = parent(call)
    if isinstance(owner, ast.Assign) and owner.value is call and len(owner.targets) == 1:
        return dotted_name(owner.targets[0])
    if isinstance(owner, (ast.AnnAssign, ast.NamedExpr)) and owner.value is call:
        return dotted_name(owner.target)
    if isinstance(owner, ast.keyword) and owner.arg:
        return owner.arg
    return None


def _named_for_training(call: ast.Call) -> bool:
    name = binding_name(call)
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return bool(_TRAIN_NAME.search(last)) and not _EVAL_NAME.search(last)
