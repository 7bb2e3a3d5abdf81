"""XLA204 unsynced-init: a multi-process XLA script whose processes start from
different random weights.

Each process builds its own model. Without the same ``torch.manual_seed`` before the
build, or ``xm.broadcast_master_param(model)`` after it, every process starts from
different weights; all-reducing the gradients then averages updates for N different
models.
"""

from __future__ import annotations

import ast

from xlalint.linter.model import InsertStatement
from xlalint.linter.order import is_optimizer_class
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.semantic import dotted_name, enclosing_function, method_name, parent
from xlalint.linter.values import assigned_values, enclosing_scopes, walk_scope

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
# Values that are not a freshly initialised model.
_NOT_BUILT = frozenset({"from_pretrained", "load", "deepcopy", "to", "cuda", "train", "eval", "float", "half"})
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
comes before it and no `xm.broadcast_master_param` is anywhere in the file. Not flagged:
`from_pretrained` models (the pretrained weights are the same everywhere), a model
that loads a state dict, a model wrapped by DDP (it broadcasts) or FSDP or
`MpModelWrapper`; a seed in another function counts (its order is not known).

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
            reported.add(id(build))
            message = (
                f"`{model}` is built with no `torch.manual_seed` before it and no "
                f"`xm.broadcast_master_param({model})` after it: each process starts from different weights"
            )
            self.report(build, message, fix=self._fix(model, build))

    # -- the model ------------------------------------------------------------------------
    def _models(self) -> list[tuple[str, ast.stmt]]:
        """(model name, the statement that builds it) for every model whose parameters an
        optimizer of the module is given."""
        semantic = self.ctx.semantic
        found: list[tuple[str, ast.stmt]] = []
        for node in semantic.calls_of("parameters", "named_parameters"):
            call = _optimizer_given(node, semantic)
            name = dotted_name(node.func.value) if call is not None else None  # type: ignore[attr-defined]
            build = self._build_of(name, call) if name and call is not None else None
            if build is not None:
                found.append((name, build))  # type: ignore[arg-type]
        return found

    def _build_of(self, name: str, use: ast.AST) -> ast.stmt | None:
        """The first statement that assigns ``name`` a new model, in the scope of ``use``
        (for ``self.<attr>``: anywhere in the class). ``model.encoder`` is built with
        ``model``."""
        while name:
            if name.startswith("self."):
                cls = next((a for a in _ancestors(use) if isinstance(a, ast.ClassDef)), None)
                scopes = [cls] if cls is not None else []
                matches = _matches(name)
                values = [v for scope in scopes for v in assigned_values(scope, matches)]
            else:
                values = []
                for scope in enclosing_scopes(use):
                    values = list(assigned_values(scope, _matches(name), shallow=True))
                    if values:
                        break
            if values:
                first = min(values, key=lambda v: (v.lineno, v.col_offset))
                return self._statement(first) if self._builds(first, name) else None
            if "." not in name:
                return None
            name = name.rsplit(".", 1)[0]
        return None

    def _builds(self, value: ast.expr, name: str) -> bool:
        """``value`` makes a new, randomly initialised model: a call (possibly
        ``.to(device)``) that is not a load, a copy, a pretrained model or a wrapper."""
        base = value
        while isinstance(base, ast.Call) and method_name(base) in _MOVES:
            base = base.func.value  # type: ignore[attr-defined]
        if not isinstance(base, ast.Call):
            return False
        callee = self.ctx.semantic.call_name(base) or dotted_name(base.func) or ""
        return callee.rsplit(".", 1)[-1] not in _NOT_BUILT and dotted_name(base.func) != name

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
        """A seed runs before ``build``: earlier in the same function (or at module
        level before a module-level build), at module level for a build in a function,
        or anywhere in another function (whose order is not known)."""
        home = enclosing_function(build)
        for seed in seeds:
            where = enclosing_function(seed)
            if where is not home:
                if home is None and where is not None:
                    continue  # a function's seed does not run before module-level code... unless called
                return True
            if (seed.lineno, seed.col_offset) < (build.lineno, build.col_offset):
                return True
        return False

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


def _optimizer_given(parameters: ast.Call, semantic) -> ast.Call | None:
    """The optimizer constructor whose ``params`` argument holds ``parameters``
    (``SGD(model.parameters())``, ``AdamW([{"params": m.parameters()}, ...])``)."""
    child: ast.AST = parameters
    for anc in _ancestors(parameters):
        if isinstance(anc, ast.stmt):
            return None
        if isinstance(anc, ast.keyword):
            continue  # `params=model.parameters()`: the value is the argument
        if isinstance(anc, ast.Call) and is_optimizer_class(semantic.call_name(anc) or ""):
            params = anc.args[0] if anc.args else next((k.value for k in anc.keywords if k.arg == "params"), None)
            return anc if params is child else None
        child = anc
    return None


def _matches(name: str):
    return lambda target: dotted_name(target) == name


def _ancestors(node: ast.AST):
    current = parent(node)
    while current is not None:
        yield current
        current = parent(current)
