"""XLA204 unsynced-init: a multi-process XLA script whose processes start from
different random weights.

Each process builds its own model. Without the same ``torch.manual_seed`` before the
build, or ``xm.broadcast_master_param(model)`` after it, every process starts from
different weights; all-reducing the gradients then averages updates for N different
models.
"""

from __future__ import annotations

import ast

from xlalint.analysis.reaching import runs_before
from xlalint.analysis.scripts import SPAWN
from xlalint.analysis.semantic import dotted_name, enclosing_function, method_name, parent, string_value
from xlalint.analysis.values import walk_scope
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import InsertStatement

SEEDS = frozenset(
    {
        "torch.manual_seed",
        "torch.random.manual_seed",
        "transformers.set_seed",
        "transformers.trainer_utils.set_seed",
        "accelerate.utils.set_seed",
        "accelerate.utils.random.set_seed",
        "lightning.seed_everything",
        "lightning.pytorch.seed_everything",
        "pytorch_lightning.seed_everything",
        "lightning_fabric.seed_everything",
    }
)
# Functions of other modules whose names say they seed everything (`utils.set_seed(42)`).
_SEED_NAMES = frozenset({"set_seed", "seed_everything", "set_random_seed", "seed_all", "fix_seed", "init_seeds"})
# Seeds of other generators (numpy, random, XLA's, CUDA's): they do not make the CPU
# initialisation of a model the same in every process.
_NOT_SEEDING_ROOTS = frozenset({"torch", "torch_xla", "numpy", "random", "jax", "tensorflow"})
BROADCAST = frozenset({"torch_xla.core.xla_model.broadcast_master_param"})
_MOVES = frozenset({"to", "cuda"})


class UnsyncedInit(Rule):
    code = "XLA204"
    name = "unsynced-init"
    summary = "Each process builds its model from its own random weights"
    explanation = """
## Why

`xmp.spawn`/`torch_xla.launch` start one process per device and each builds its own
model. Unless they draw the same random numbers, the initial weights differ: the
all-reduced gradients then average updates meant for N different models, and the
run does not converge as one model would. Seed the CPU generator the same in every
process before building the model (`torch.manual_seed(seed)`, `transformers.set_seed`),
or copy the master's weights to the others after moving the model to the device
(`xm.broadcast_master_param(model)`). `torch_xla.manual_seed` alone does not help: it
seeds only the XLA generator, and a model built on the CPU and then moved still gets
different weights in each process.

## What is flagged

In a multi-process XLA script (one that spawns or launches itself, defines `_mp_fn`,
calls `dist.init_process_group("xla")` or `xr.world_size()`/`xr.global_ordinal()`;
not SPMD, not an HF Trainer/accelerate loop), the statement that builds the model
whose parameters go to an optimizer (`model = Net()`, `self.model =
build(cfg).to(device)`), when no seed call
comes before it and no `xm.broadcast_master_param` is anywhere in the file. The
optimizer is traced to its model whatever its import (`from transformers import *`,
`AdamW`), through parameter groups built from `model.named_parameters()` and through a
helper of the file given the model. A `from_pretrained(...)` of a task class that adds a
freshly initialised head (`num_labels=5` on a base checkpoint) builds a model: each
process draws its own head. The seed must come first: a seed after the build in the same
function (also through a helper of the file that seeds) does not count. Not flagged:
other `from_pretrained` models (the pretrained weights are the same everywhere), a model
that loads a state dict, a model wrapped by DDP (it broadcasts) or FSDP, a model held by
`xmp.MpModelWrapper` or built at module level before a fork-start
`xmp.spawn(..., start_method="fork")` (every process shares its weights); a seed in a
function the file never calls counts (its order is not known).

## Fix

unsafe: insert `xm.broadcast_master_param(model)` after the statement that moves the
model to the device (`model = Net().to(device)`, `model.to(device)`): it changes the
starting weights of every process but the master. No fix when the model is never moved
in sight.

## Example

```python
model = Net().to(device)
```
becomes
```python
model = Net().to(device)
xm.broadcast_master_param(model)
```
"""
    fix_availability = "unsafe"

    VALID = [
        Valid(
            """
            import torch
            import torch_xla
            def _mp_fn(index):
                torch.manual_seed(0)
                model = Net().to(torch_xla.device())
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """
        ),
        Valid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                model = Net().to(xm.xla_device())
                xm.broadcast_master_param(model)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """
        ),
        # A seed set by a helper of the module, and a pretrained model.
        Valid(
            """
            import random
            import torch
            import torch_xla.runtime as xr
            from transformers import AutoModel
            def set_seed(seed):
                random.seed(seed)
                torch.manual_seed(seed)
            def main():
                print(xr.world_size())
                set_seed(1)
                model = Net()
                other = AutoModel.from_pretrained("bert-base-uncased")
                opt = torch.optim.AdamW([*model.parameters(), *other.parameters()])
            """
        ),
        # Held by MpModelWrapper: every process shares one copy of the weights.
        Valid(
            """
            import torch
            import torch_xla
            import torch_xla.distributed.xla_multiprocessing as xmp
            WRAPPED = xmp.MpModelWrapper(Net())
            def _mp_fn(index):
                model = WRAPPED.to(torch_xla.device())
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """
        ),
        # One process.
        Valid(
            """
            import torch
            import torch_xla
            model = Net().to(torch_xla.device())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                device = torch_xla.device()
                torch_xla.manual_seed(0)
                model = Net().to(device)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """,
            unsafe_fixed="""
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                device = torch_xla.device()
                torch_xla.manual_seed(0)
                model = Net().to(device)
                xm.broadcast_master_param(model)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """,
            count=1,
        ),
        # Built, then moved later; the seed comes too late.
        Invalid(
            """
            import torch
            import torch_xla
            def _mp_fn(index):
                model = Net()
                torch.manual_seed(0)
                model.to(torch_xla.device())
                opt = torch.optim.Adam(params=model.parameters())
            """,
            unsafe_fixed="""
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm

            def _mp_fn(index):
                model = Net()
                torch.manual_seed(0)
                model.to(torch_xla.device())
                xm.broadcast_master_param(model)
                opt = torch.optim.Adam(params=model.parameters())
            """,
            count=1,
        ),
        # A new head on a base checkpoint, an optimizer from a star import.
        Invalid(
            """
            import torch_xla
            from transformers import *
            def _mp_fn(index):
                model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", num_labels=5)
                set_seed(42)
                optimizer = AdamW([{"params": [p for n, p in model.named_parameters()]}])
            """,
            count=1,
        ),
        # Never moved in sight: reported, no fix.
        Invalid(
            """
            import torch
            import torch_xla.runtime as xr
            class Trainer:
                def __init__(self):
                    self.model = build_model(xr.world_size())
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.distributed.data_parallel or self.ctx.parallelism.wraps_model:
            return
        semantic = self.ctx.semantic
        calls = semantic.calls_of("broadcast_master_param")
        if any(semantic.call_name(c) in BROADCAST for c in calls):
            return
        models = self._models()
        seeds = self._seed_calls() if models else []
        reported: set[int] = set()
        for model, build in models:
            if id(build) in reported or self._seeded_before(build, seeds) or self._loads_state(model):
                continue
            if self._shared_by_fork(build):
                continue
            reported.add(id(build))
            message = (
                f"`{model}` is neither seeded before nor broadcast after its build: each process has its own weights"
            )
            self.report(build, message, fix=self._fix(model, build))

    # -- the model ------------------------------------------------------------------------
    def _models(self) -> list[tuple[str, ast.stmt]]:
        """(model name, the statement that builds it) for every model whose parameters an
        optimizer of the module is given (``analysis.training_objects``), when that
        statement gives it fresh random weights."""
        objects = self.ctx.training_objects
        found: list[tuple[str, ast.stmt]] = []
        for optimizer in objects.optimizers:
            for model in optimizer.models:
                build = objects.build_of(model, optimizer.statement)
                if build is not None and objects.builds_fresh_weights(build[1], model):
                    found.append((model, build[0]))
        return found

    def _shared_by_fork(self, build: ast.stmt) -> bool:
        """Built at module level before ``xmp.spawn(..., start_method="fork")``: every
        forked process starts from the parent's weights."""
        if enclosing_function(build) is not None:
            return False
        for call in self.ctx.semantic.calls_of("spawn"):
            if self.ctx.semantic.call_name(call) in SPAWN and string_value(_keyword(call, "start_method")) == "fork":
                return (call.lineno, call.col_offset) > (build.lineno, build.col_offset) or enclosing_function(
                    call
                ) is not None
        return False

    def _statement(self, node: ast.AST) -> ast.stmt:
        current = node
        while not isinstance(current, ast.stmt):
            current = parent(current)  # type: ignore[assignment]
        return current

    def _loads_state(self, model: str) -> bool:
        return any(
            method_name(c) == "load_state_dict" and (dotted_name(c.func.value) or "").startswith(model)  # type: ignore[attr-defined]
            for c in self.ctx.semantic.calls
        )

    # -- seeds ------------------------------------------------------------------------------
    def _seed_calls(self) -> list[ast.Call]:
        """The calls that seed torch's CPU generator: a seed function, a function of
        another module named like one (`utils.set_seed(42)`), and calls of same-module
        functions that make one (transitively, a few levels deep)."""
        semantic, steps = self.ctx.semantic, self.ctx.steps
        found: list[ast.Call] = []
        for call in semantic.calls_of("manual_seed", *_SEED_NAMES):
            name = semantic.call_name(call)
            if name is not None:
                root = name.split(".", 1)[0]
                last = name.rsplit(".", 1)[-1]
                if name in SEEDS or (root not in _NOT_SEEDING_ROOTS and last in _SEED_NAMES):
                    found.append(call)
            elif steps.resolve(call) is None and (dotted_name(call.func) or "").rsplit(".", 1)[-1] in _SEED_NAMES:
                found.append(call)
        frontier, seen = found, set()
        for _depth in range(4):
            functions = {}
            for call in frontier:
                function = enclosing_function(call)
                if function is not None and id(function) not in seen:
                    functions[id(function)] = function
            if not functions:
                break
            seen |= functions.keys()
            frontier = [
                call
                for function in functions.values()
                for call in semantic.calls_of(function.name)
                if steps.resolve(call) is function
            ]
            found = found + frontier
        return found

    def _seeded_before(self, build: ast.stmt, seeds: list[ast.Call]) -> bool:
        """A seed runs before ``build``: before it where a function of the module (or the
        module) runs both, following the calls (``reaching.runs_before``); otherwise at
        module level for a build in a function, or anywhere in another function (whose
        order is not known)."""
        home = enclosing_function(build)
        called = {id(f) for seed in seeds if (f := enclosing_function(seed)) is not None and self._called_here(f)}
        for seed in seeds:
            # Where a function of the module runs both, the calls decide: a seed after
            # the call that builds the model is too late, and so is the call of a
            # function that seeds only after building it (`main()`).
            before = runs_before(seed, build, self.ctx.semantic)
            if before is not None:
                if before:
                    return True
                continue
            where = enclosing_function(seed)
            if where is not None and where is not home and id(where) in called:
                continue  # a helper this module calls: its calls are among the seeds, in order
            if where is not home:
                if home is None and where is not None:
                    continue  # a function's seed does not run before module-level code... unless called
                return True
            if (seed.lineno, seed.col_offset) < (build.lineno, build.col_offset):
                return True
        return False

    def _called_here(self, function: ast.AST) -> bool:
        steps = self.ctx.steps
        return any(steps.resolve(c) is function for c in self.ctx.semantic.calls_of(function.name))  # type: ignore[attr-defined]

    # -- fix -----------------------------------------------------------------------------------
    def _fix(self, model: str, build: ast.stmt):
        anchor = self._moved_at(model, build)
        if anchor is None:
            return None
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        return self.fix(
            "unsafe",
            "copy the master's initial weights to every process",
            InsertStatement(self.ctx.span(anchor), f"{xm}.broadcast_master_param({model})", "after"),
            imports=imports,
        )

    def _moved_at(self, model: str, build: ast.stmt) -> ast.stmt | None:
        """The statement after which the model is on the device: the build itself when it
        ends in ``.to(...)``, else the first later ``model.to(...)`` in the same function."""
        value = getattr(build, "value", None)
        if isinstance(value, ast.Call) and method_name(value) in _MOVES:
            return build
        home = enclosing_function(build) or self.ctx.tree
        moves = []
        for node in walk_scope(home, shallow=True):
            if (
                isinstance(node, ast.Call)
                and method_name(node) in _MOVES
                and dotted_name(node.func.value) == model  # type: ignore[attr-defined]
                and node.lineno > (build.end_lineno or build.lineno)
            ):
                stmt = self._statement(node)
                if isinstance(stmt, (ast.Expr, ast.Assign)) and stmt.value is node:
                    moves.append(stmt)
        return min(moves, key=lambda s: s.lineno, default=None)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)
