"""XLA501 optimizer-before-move: an optimizer built from a model's parameters before the
model is moved to the XLA device.

Moving a module to an XLA device does not move its parameters in place: torch makes a
new ``Parameter`` for each (an XLA tensor cannot take over a CPU tensor's storage). The
optimizer built before the move keeps the old CPU parameters, which no gradient ever
reaches, so it steps nothing and the model never trains: the loss stays exactly flat.
"""

from __future__ import annotations

import ast

from xlalint.linter.model import MoveStatement
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.semantic import dotted_name, enclosing_function, parent
from xlalint.linter.training_objects import Move, Optimizer, same_object_tree

# torch_xla's FSDP wrappers move the model too: under them the optimizer must be built
# after the wrap (XLA209), not merely after a `.to`.
XLA_FSDP = frozenset(
    {
        "torch_xla.distributed.fsdp.XlaFullyShardedDataParallel",
        "torch_xla.distributed.fsdp.xla_fully_sharded_data_parallel.XlaFullyShardedDataParallel",
        "torch_xla.experimental.spmd_fully_sharded_data_parallel.SpmdFullyShardedDataParallel",
        "torch_xla.distributed.spmd.SpmdFullyShardedDataParallel",
    }
)
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef, ast.ClassDef)


class OptimizerBeforeMove(Rule):
    code = "XLA501"
    name = "optimizer-before-move"
    summary = "An optimizer is built from the model's parameters before the model is moved to the XLA device"
    fix_availability = "sometimes"
    explanation = """
## Why

`model.to(xla_device)` makes a *new* parameter object for every parameter: an XLA
tensor cannot take over the storage of a CPU tensor, so torch's `Module._apply` swaps
in new `Parameter`s (on CUDA it changes `param.data` in place and keeps them). An
optimizer built before the move holds the old CPU parameters. The backward fills the
gradients of the new ones, the optimizer steps the old ones (which have no gradient),
and the model never changes. Nothing fails: the loss stays exactly flat.

Reproduced on torch 2.9.0 + torch_xla 2.9.0 (CPU): `nn.Linear(8, 1)`, `SGD` built
before `model.to(torch_xla.device())`, five steps: the loss is 1.7868 at every step,
and none of the optimizer's parameters is on the XLA device. With the `.to` first the
loss falls from the first step. `xlalint run --compare` on a whole script (an MLP
regression, six steps, tests/harness/scripts/optimizer_before_move.py): the original's
loss is 7.9756 at every step, and the run reports at the optimizer's line that "the
optimizer steps 4 of its 4 parameters on the CPU" and that "the loss never changed";
after the fix the loss goes from 7.9756 to 2.6614 with the same compiles (2) and
executions (6).

## What is flagged

An optimizer (`torch.optim.*`, HF `AdamW`/`Adafactor`, any import, also through
`from transformers import *`) whose parameters come from a model (`model.parameters()`,
`model.named_parameters()`, parameter groups built from them, a variable holding them,
a same-file helper given the model), built before `model.to(<XLA device>)`,
`model = model.to(...)` or `accelerator.prepare(model)` in the same function (or both at
module level). The device is followed through variables, `self.<attr>` and the
arguments of the function. Not flagged: a model already moved before the optimizer is
built, an optimizer built again after the move, an optimizer passed to the same
`accelerator.prepare(...)` call as its model (accelerate re-points it at the moved
parameters), a move to a device that is not known to be XLA.

## Fix

Move the `.to(...)` statement up, right before the optimizer is built. Safe when both
are in the same block and nothing between them uses the optimizer or the model;
unsafe when something between them does (it then runs with the model already on the
device). When the move reads a name assigned between them (`device =
torch_xla.device()` after the optimizer), the optimizer's statement moves down, right
after the move, instead (safe, when nothing between them uses the optimizer or assigns
what it reads). No fix when they are in different blocks or functions, or when the model
is wrapped in torch_xla's FSDP after the optimizer is built: the wrap moves (and shards)
the model too, so the optimizer has to be built after the wrap (XLA209).

## Example

```python
model = Net()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model.to(torch_xla.device())
```
becomes
```python
model = Net()
model.to(torch_xla.device())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
```
"""

    VALID = [
        Valid(
            """
            import torch
            import torch_xla
            model = Net().to(torch_xla.device())
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            """
        ),
        # Moved before, and moved again later (a no-op on the device).
        Valid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            def main():
                device = xm.xla_device()
                model = Net()
                model.to(device)
                optimizer = torch.optim.Adam(model.parameters())
                model.to(device)
            """
        ),
        # accelerate re-points the optimizers it prepares with the model.
        Valid(
            """
            import torch
            from accelerate import Accelerator
            accelerator = Accelerator()
            model = Net()
            optimizer = torch.optim.AdamW(model.parameters())
            model, optimizer = accelerator.prepare(model, optimizer)
            """
        ),
        # A CUDA move keeps the parameter objects.
        Valid(
            """
            import torch
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.to("cuda")
            """
        ),
        # Built again after the move.
        Valid(
            """
            import torch
            import torch_xla
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model = model.to(torch_xla.device())
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            model = Net()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            model.to(torch_xla.device())
            """,
            fixed="""
            import torch
            import torch_xla
            model = Net()
            model.to(torch_xla.device())
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            """,
            count=1,
        ),
        # Parameter groups from `named_parameters()`, a star-imported HF optimizer, a
        # device in a variable; a scheduler between them uses the optimizer: unsafe.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            from transformers import *
            def train(model):
                groups = [
                    {"params": [p for n, p in model.named_parameters() if "bias" not in n], "weight_decay": 0.01},
                    {"params": [p for n, p in model.named_parameters() if "bias" in n], "weight_decay": 0.0},
                ]
                optimizer = AdamW(groups, lr=5e-5)
                scheduler = get_linear_schedule_with_warmup(optimizer, 0, 100)
                device = xm.xla_device()
                model = model.to(device)
            """,
            unsafe_fixed=None,
            count=1,
        ),
        Invalid(
            """
            import torch
            import torch_xla
            def main(device):
                model = Net()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
                model = model.to(device)
            main(torch_xla.device())
            """,
            unsafe_fixed="""
            import torch
            import torch_xla
            def main(device):
                model = Net()
                model = model.to(device)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1)
            main(torch_xla.device())
            """,
            count=1,
        ),
        # Built by a helper of the module, at its call.
        Invalid(
            """
            import torch
            import torch_xla
            def make_optimizer(net, lr):
                return torch.optim.Adam(net.parameters(), lr=lr)
            model = Net()
            optimizer = make_optimizer(model, 1e-3)
            model.to(torch_xla.device())
            """,
            fixed="""
            import torch
            import torch_xla
            def make_optimizer(net, lr):
                return torch.optim.Adam(net.parameters(), lr=lr)
            model = Net()
            model.to(torch_xla.device())
            optimizer = make_optimizer(model, 1e-3)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        objects = self.ctx.training_objects
        if not objects.optimizers or not objects.moves:
            return
        for optimizer in objects.optimizers:
            found = self._late_move(optimizer)
            if found is None:
                continue
            model, move = found
            line = move.statement.lineno
            where = f"`{self.ctx.source_of(move.call)}` (line {line})"
            message = (
                f"`{optimizer.name or 'this optimizer'}` is built from `{model}`'s parameters before {where}: "
                "the move makes new parameters on the XLA device, the optimizer steps the old CPU ones, "
                "and the model never trains"
            )
            wrap = self._fsdp_wrap_after(model, optimizer)
            if wrap is not None:
                message += f"; build the optimizer after the FSDP wrap (line {wrap.lineno}), which moves the model too"
            fix = None if wrap is not None else self._fix(optimizer, move)
            self.report(optimizer.call, message, fix=fix)

    # -- what is flagged -------------------------------------------------------------------
    def _late_move(self, optimizer: Optimizer) -> tuple[str, Move] | None:
        """(model, its first move to the XLA device after the optimizer is built), when it
        was not on the device before and the optimizer is not built again after."""
        objects = self.ctx.training_objects
        scope = enclosing_function(optimizer.statement)
        built_at = _position(optimizer.statement)
        for model in optimizer.models:
            moves = objects.moves_of(model, scope)
            if any(_position(m.statement) < built_at for m in moves):
                continue
            later = sorted(
                (m for m in moves if _position(m.statement) > built_at), key=lambda m: _position(m.statement)
            )
            if not later:
                continue
            move = later[0]
            if move.kind == "prepare" and self._prepared_anywhere(optimizer):
                continue
            if self._built_again(optimizer, move, scope):
                continue
            return model, move
        return None

    def _prepared_anywhere(self, optimizer: Optimizer) -> bool:
        return optimizer.name is not None and any(
            m.kind == "prepare" and optimizer.name in m.prepared for m in self.ctx.training_objects.moves
        )

    def _built_again(self, optimizer: Optimizer, move: Move, scope) -> bool:
        return optimizer.name is not None and any(
            other.name == optimizer.name
            and enclosing_function(other.statement) is scope
            and _position(other.statement) > _position(move.statement)
            for other in self.ctx.training_objects.optimizers
        )

    def _fsdp_wrap_after(self, model: str, optimizer: Optimizer) -> ast.Call | None:
        """A torch_xla FSDP wrap of ``model`` after the optimizer, in the same function."""
        semantic, scope = self.ctx.semantic, enclosing_function(optimizer.statement)
        for call in semantic.calls:
            if semantic.call_name(call) not in XLA_FSDP or enclosing_function(call) is not scope:
                continue
            wrapped = self.ctx.source_of(call.args[0]) if call.args else ""
            if same_object_tree(model, wrapped) and (call.lineno, call.col_offset) > _position(optimizer.statement):
                return call
        return None

    # -- fix -----------------------------------------------------------------------------------
    def _fix(self, optimizer: Optimizer, move: Move):
        """Move the `.to` statement up before the optimizer, in one block."""
        if move.kind != "to" or isinstance(move.statement, _COMPOUND) or isinstance(optimizer.statement, _COMPOUND):
            return None
        block = _block_of(optimizer.statement, move.statement)
        if block is None:
            return None
        start, end = block.index(optimizer.statement), block.index(move.statement)
        between = block[start + 1 : end]
        uses = {optimizer.name} if optimizer.name else set()
        uses |= set(optimizer.models)
        used = _reads_any(between, uses)
        applicability = "unsafe" if used else "safe"
        if not _reads_any([move.statement], _paths_bound([optimizer.statement, *between])):
            return self.fix(
                applicability,
                "move the model to the XLA device before building the optimizer",
                MoveStatement(self.ctx.span(move.statement), self.ctx.span(optimizer.statement), "before"),
            )
        # The move reads something assigned in between (`device = torch_xla.device()`):
        # build the optimizer after the move instead, when nothing in between needs it
        # and it reads nothing assigned there but the moved model.
        bound_between = _paths_bound(between) - {move.model}
        if used or optimizer.name is None or _reads_any([optimizer.statement], bound_between):
            return None
        return self.fix(
            "safe",
            "build the optimizer after the model is moved to the XLA device",
            MoveStatement(self.ctx.span(optimizer.statement), self.ctx.span(move.statement), "after"),
        )


def _position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def _block_of(first: ast.stmt, second: ast.stmt) -> list[ast.stmt] | None:
    """The statement list holding both, if they are in one."""
    owner = parent(first)
    if owner is None or owner is not parent(second):
        return None
    for field in ("body", "orelse", "finalbody"):
        block = getattr(owner, field, None)
        if isinstance(block, list) and first in block and second in block:
            return block
    return None


def _reads_any(statements: list[ast.stmt], names: set[str]) -> bool:
    """The statements read one of ``names``, a part of one, or what one is part of."""
    return any(same_object_tree(read, name) for read in _paths_read(statements) for name in names)


def _paths_read(statements: list[ast.stmt]) -> set[str]:
    """The names and attribute paths the statements read (``self.device``, ``model``)."""
    found: set[str] = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                name = dotted_name(node)
                if name:
                    found.add(name)
    return found


def _paths_bound(statements: list[ast.stmt]) -> set[str]:
    """The names and attribute paths the statements assign, define or import."""
    bound: set[str] = set()
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, (ast.Store, ast.Del)):
                name = dotted_name(node)
                if name:
                    bound.add(name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
    return bound
