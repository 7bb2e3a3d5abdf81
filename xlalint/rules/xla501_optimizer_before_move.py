"""XLA501 optimizer-before-move: an optimizer built from a model's parameters before the
model is moved to the XLA device.

Moving a module to an XLA device does not move its parameters in place: torch makes a
new ``Parameter`` for each (an XLA tensor cannot take over a CPU tensor's storage). The
optimizer built before the move keeps the old CPU parameters, which no gradient ever
reaches, so it steps nothing and the model never trains: the loss stays exactly flat.
"""

from __future__ import annotations

import ast

from xlalint.analysis.optimizer_place import (
    COMPOUND,
    build_after_wrap,
    move_down,
    paths_bound,
    position,
    reads_any,
    taking_statements,
)
from xlalint.analysis.parallelism import XLA_FSDP_KINDS, Wrap
from xlalint.analysis.semantic import enclosing_function
from xlalint.analysis.training_objects import CarriedMove, Move, Optimizer, same_object_tree
from xlalint.analysis.values import enclosing
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import MoveStatement


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
a same-file helper given the model), built (or its parameters taken: `groups = [...]`
before the move, `AdamW(groups)` after it) before `model.to(<XLA device>)`,
`model = model.to(...)`, `net = model.to(...)` or `accelerator.prepare(model)` in the
same function (or both at module level). The device is followed through variables,
`self.<attr>` and the arguments of the function. A CUDA device that XLA104's port makes
the XLA device (`device = torch.device("cuda:0")`, `"cuda"`,
`torch.accelerator.current_accelerator()`) counts in an XLA script, and in a CUDA script
the finding is reported after the port (on a GPU the move keeps the parameter objects).

Moving a module moves its submodules: `Wrapper(model).to(device)` (and `w =
Wrapper(model)` ... `w.to(device)`) is a move of `model` when the wrapper holds it: a
class derived from `nn.Module`, of the file or of a local module it imports (the DDPM
pattern: `from diffusion import GaussianDiffusionTrainer`, then `trainer =
GaussianDiffusionTrainer(net_model, ...).to(device)` after `optim =
Adam(net_model.parameters())`, measured: the loss stays flat), whose `__init__` stores
the argument as an attribute (`self.model = model`, `self.add_module("m", model)`), or
torch's containers and data-parallel wrappers given it positionally
(`nn.Sequential(model, head)`, `nn.ModuleList([model])`, `nn.DataParallel(model)`).
Library classes are not assumed to hold what they are given, nor is a class that keeps
a copy or a number read from it.

The model and its optimizer are also followed across the file's functions, up to three
calls away: returned together (`train_set, model, optimizer = load_train_objs()`, then
moved by the caller) or passed together to a function or class of the file that moves
the model (the DDP tutorial's `Trainer(model, train_data, optimizer, ...)` whose
`__init__` does `self.model = model.to(gpu_id)`), unless that function builds an
optimizer again after the move. A model passed without its optimizer is not followed.
Not flagged: a model already moved before its parameters are
taken, an optimizer built again after the move, an optimizer passed to the same
`accelerator.prepare(...)` call as its model (accelerate re-points it at the moved
parameters), a move to a device that is not known to be XLA.

## Fix

Move the `.to(...)` statement up, right before the first statement that takes the
model's parameters: the parameter groups (`[p for n, p in model.named_parameters() ...]`),
a `list(model.parameters())`, or the optimizer itself. Each of them holds the parameter
objects of that moment, so none may stay above the move. Safe when they are all in the
block of the move and nothing between them and the move uses the optimizer or the model;
unsafe when something between does (it then runs with the model already on the device).
When the move reads a name assigned between them (`device = torch_xla.device()` after
the optimizer), those statements move down, in their order, right after the move instead
(safe, when nothing between them and the move reads what they assign, and they read
nothing assigned there). No fix when they are in different blocks or functions.

A wrapper's move (`trainer = Wrapper(model).to(device)`) goes up the same way; it runs
the wrapper's `__init__` earlier, so the fix is safe only when nothing but the
statements that take the parameters lies between. Across functions there is no fix: the
message says where the optimizer is built, where the model is moved and through which
calls, and to build the optimizer after the move (in `Trainer.__init__`, from
`self.model.parameters()`).

When torch_xla's FSDP wraps the model after the optimizer is built, the wrap moves (and
shards) the model too, so the optimizer is built after the wrap, from the wrapped model:
the statements that take the parameters move down right after `model = FSDP(model)`
(safe; unsafe when they choose parameters by name, which FSDP's flattened parameters no
longer have). No fix when something between uses the optimizer (a scheduler) or the
wrapped model gets another name.

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
        # A move to the CPU keeps the parameter objects.
        Valid(
            """
            import torch
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.to("cpu")
            """
        ),
        # Parameters taken again after the move: the optimizer may be given those.
        Valid(
            """
            import torch
            import torch_xla
            model = Net()
            params = list(model.parameters())
            model.to(torch_xla.device())
            params = list(model.parameters())
            optimizer = torch.optim.SGD(params, lr=0.1)
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
        # The wrapper keeps a copy of the model, not the model: moving it moves the copy.
        Valid(
            """
            import copy
            import torch
            import torch_xla
            from torch import nn
            class Ema(nn.Module):
                def __init__(self, model):
                    super().__init__()
                    self.model = copy.deepcopy(model)
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            ema = Ema(model).to(torch_xla.device())
            """
        ),
        # Passed to a class that builds its own optimizer after the move.
        Valid(
            """
            import torch
            import torch_xla
            class Trainer:
                def __init__(self, model, optimizer):
                    self.model = model.to(torch_xla.device())
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            trainer = Trainer(model, optimizer)
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
        # Parameter groups: the move goes above the first statement that takes the
        # parameters, not between the groups and the optimizer.
        Invalid(
            """
            import torch
            import torch_xla
            model = Net()
            groups = [{"params": [p for n, p in model.named_parameters() if "bias" not in n]}]
            optimizer = torch.optim.AdamW(groups, lr=1e-3)
            model = model.to(torch_xla.device())
            """,
            fixed="""
            import torch
            import torch_xla
            model = Net()
            model = model.to(torch_xla.device())
            groups = [{"params": [p for n, p in model.named_parameters() if "bias" not in n]}]
            optimizer = torch.optim.AdamW(groups, lr=1e-3)
            """,
            count=1,
        ),
        # torch_xla's FSDP wraps the model after the move: built after the wrap.
        Invalid(
            """
            import torch
            import torch_xla
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            def _mp_fn(index):
                model = Net()
                opt = torch.optim.AdamW(model.parameters())
                model = model.to(torch_xla.device())
                model = FSDP(model)
            """,
            fixed="""
            import torch
            import torch_xla
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            def _mp_fn(index):
                model = Net()
                model = model.to(torch_xla.device())
                model = FSDP(model)
                opt = torch.optim.AdamW(model.parameters())
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
        # A wrapper module that holds the model: moving it moves the model (issue 28, DDPM).
        Invalid(
            """
            import torch
            import torch_xla
            from torch import nn
            class DiffusionTrainer(nn.Module):
                def __init__(self, model, T):
                    super().__init__()
                    self.model = model
                    self.T = T
            net_model = Net()
            optim = torch.optim.Adam(net_model.parameters(), lr=2e-4)
            trainer = DiffusionTrainer(net_model, 1000).to(torch_xla.device())
            """,
            fixed="""
            import torch
            import torch_xla
            from torch import nn
            class DiffusionTrainer(nn.Module):
                def __init__(self, model, T):
                    super().__init__()
                    self.model = model
                    self.T = T
            net_model = Net()
            trainer = DiffusionTrainer(net_model, 1000).to(torch_xla.device())
            optim = torch.optim.Adam(net_model.parameters(), lr=2e-4)
            """,
            count=1,
        ),
        # Built in one function, moved in the class the caller gives both to: no fix.
        Invalid(
            """
            import torch
            import torch_xla
            class Trainer:
                def __init__(self, model, optimizer, device):
                    self.model = model.to(device)
                    self.optimizer = optimizer
            def load_train_objs():
                model = Net()
                optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
                return model, optimizer
            def main():
                model, optimizer = load_train_objs()
                trainer = Trainer(model, optimizer, torch_xla.device())
            """,
            unsafe_fixed=None,
            count=1,
        ),
    ]

    def finish(self) -> None:
        objects = self.ctx.training_objects
        if not objects.optimizers or not objects.all_moves:
            return
        for optimizer in objects.optimizers:
            found = self._late_move(optimizer)
            if found is None:
                carried = None if self._moved_before(optimizer) else objects.carried_move(optimizer)
                if carried is not None:
                    self.report(optimizer.call, self._carried_message(optimizer, carried))
                continue
            model, move = found
            # Why the model never trains (the move makes new parameters, the optimizer
            # steps the old CPU ones) and where to build it are the explanation's.
            line = move.statement.lineno
            moves = "moves its holder" if move.wrapper is not None else "moves it"
            taken = ""
            if position(optimizer.statement) > position(move.statement):
                taken = f" at line {optimizer.taken[0].lineno},"
            message = (
                f"`{optimizer.name or 'this optimizer'}` takes `{model}`'s parameters{taken} before line {line} "
                f"{moves} to XLA: the model never trains"
            )
            wrap = self._fsdp_wrap_after(model, optimizer)
            if wrap is not None:
                message += f" (FSDP wraps it at line {wrap.call.lineno})"
                fix = build_after_wrap(self.ctx.training_objects, optimizer, model, wrap, self.ctx.span)
            else:
                fix = self._fix(optimizer, model, move)
            self.report(optimizer.call, message, fix=fix)

    def _carried_message(self, optimizer: Optimizer, carried: CarriedMove) -> str:
        """Where the optimizer is built, where the move is and how the model got there,
        and what to do: no text moves a statement across functions safely."""
        move = carried.move
        function = _function_name(move.statement)
        # The calls that reach the move, by line (at most three); what to do is the explanation's.
        lines = [str(c.lineno) for c in carried.calls]
        through = ", ".join(lines[:3]) + (", ..." if len(lines) > 3 else "")
        models = "`, `".join(optimizer.models[:2]) + ("`, ..." if len(optimizer.models) > 2 else "`")
        return (
            f"`{optimizer.name or 'this optimizer'}` takes `{models}'s parameters before {function} "
            f"moves it to XLA (line {move.statement.lineno}, via {'line' if len(lines) == 1 else 'lines'} {through})"
        )

    # -- what is flagged -------------------------------------------------------------------
    def _late_move(self, optimizer: Optimizer) -> tuple[str, Move] | None:
        """(model, its first move to the XLA device after the optimizer's parameters are
        taken), when it was not on the device before and the optimizer is not built again
        after."""
        objects = self.ctx.training_objects
        scope = enclosing_function(optimizer.statement)
        taken_at = position(optimizer.taken[0] if optimizer.taken else optimizer.statement)
        for model in optimizer.models:
            if objects.move_before(model, scope, taken_at) is not None:
                continue
            move = objects.move_after(model, scope, taken_at)
            if move is None:
                continue
            moved_at = position(move.statement)
            if position(optimizer.statement) > moved_at and any(
                position(taken) > moved_at for taken in optimizer.taken
            ):
                # Built after the move from a name also assigned after it (`params =
                # model.parameters()` again): which value reaches is not known, so no finding.
                continue
            if move.kind == "prepare" and self._prepared_anywhere(optimizer):
                continue
            if self._built_again(optimizer, move, scope):
                continue
            return model, move
        return None

    def _moved_before(self, optimizer: Optimizer) -> bool:
        """A model the optimizer holds is on the device before its parameters are taken."""
        scope = enclosing_function(optimizer.statement)
        taken_at = position(optimizer.taken[0] if optimizer.taken else optimizer.statement)
        return any(
            self.ctx.training_objects.move_before(model, scope, taken_at) is not None for model in optimizer.models
        )

    def _prepared_anywhere(self, optimizer: Optimizer) -> bool:
        return optimizer.name is not None and any(
            m.kind == "prepare" and optimizer.name in m.prepared for m in self.ctx.training_objects.moves
        )

    def _built_again(self, optimizer: Optimizer, move: Move, scope) -> bool:
        return optimizer.name is not None and any(
            other.name == optimizer.name
            and other.statement is not optimizer.statement
            and position(other.statement) > position(move.statement)
            for other in self.ctx.training_objects.optimizers_in(scope)
        )

    def _fsdp_wrap_after(self, model: str, optimizer: Optimizer) -> Wrap | None:
        """A torch_xla FSDP wrap of ``model`` after the optimizer, in the same function."""
        scope = enclosing_function(optimizer.statement)
        for wrap in self.ctx.parallelism.wrapped(*XLA_FSDP_KINDS):
            if enclosing_function(wrap.call) is not scope or wrap.module is None:
                continue
            wrapped = self.ctx.source_of(wrap.module)
            if same_object_tree(model, wrapped) and position(wrap.call) > position(optimizer.statement):
                return wrap
        return None

    # -- fix -----------------------------------------------------------------------------------
    def _fix(self, optimizer: Optimizer, model: str, move: Move):
        """Move the `.to` statement up before the first statement that takes the model's
        parameters (parameter groups, `list(model.parameters())`, the optimizer), in one
        block; or, when the move reads what is assigned there, those statements down after it."""
        if move.kind != "to" or isinstance(move.statement, COMPOUND) or isinstance(optimizer.statement, COMPOUND):
            return None
        found = taking_statements(self.ctx.training_objects, optimizer, model, move.statement)
        if found is None:
            return None
        takers, between = found
        uses = {optimizer.name} if optimizer.name else set()
        uses |= set(optimizer.models)
        # What the move binds (`trainer = Wrapper(model).to(dev)`): read in between, it
        # was another value there.
        uses |= paths_bound([move.statement])
        # A wrapper's construction runs the user's `__init__` earlier: only across the
        # statements that take the parameters is that known to change nothing.
        used = reads_any(between, uses) or (move.wrapper is not None and bool(between))
        if not reads_any([move.statement], paths_bound([*takers, *between])):
            return self.fix(
                "unsafe" if used else "safe",
                "move the model to the XLA device before its parameters are taken for the optimizer",
                MoveStatement(self.ctx.span(move.statement), self.ctx.span(takers[0]), "before"),
            )
        # The move reads something assigned in between (`device = torch_xla.device()`):
        # take the parameters and build the optimizer after the move instead, when nothing
        # in between needs them and they read nothing assigned there.
        if used or optimizer.name is None:
            return None
        return move_down(
            takers,
            between,
            move.statement,
            "build the optimizer after the model is moved to the XLA device",
            self.ctx.span,
        )


def _function_name(node: ast.AST) -> str:
    """``Trainer.__init__``, ``main``, or "the module's code"."""
    function = enclosing_function(node)
    if function is None:
        return "the module's code"
    cls = enclosing(function, ast.ClassDef)
    return f"`{cls.name}.{function.name}`" if cls is not None else f"`{function.name}`"  # type: ignore[attr-defined]
