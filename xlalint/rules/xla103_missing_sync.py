"""XLA103 missing-sync: a training step loop that never cuts the lazy graph."""

from __future__ import annotations

import ast

from xlalint.linter.model import AppendToBody, InsertStatement
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.scripts import uses_syncing_library
from xlalint.linter.steps import StepLoop

# Statements after which nothing in the block runs: a sync goes before them.
_JUMPS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


class MissingSync(Rule):
    code = "XLA103"
    name = "missing-sync"
    summary = "training step loop with no sync point: the lazy graph grows across iterations"
    fix_availability = "safe"
    explanation = """
torch_xla records operations lazily and compiles and runs the graph only at a *sync
point*. A training loop with none keeps extending one graph across iterations: memory
grows, nothing runs until something reads a value, and each read compiles a new, ever
larger graph.

**Flagged**: the step loop (the innermost loop that calls `.backward()`, directly or
through functions of the same file) when its step has no sync point, or when its only
sync is under a gradient-accumulation guard (`if (i + 1) % k == 0:`): the graph then
spans k micro-steps.

Sync points: `torch_xla.sync()` (`xm.mark_step()` before 2.4), iterating a
`pl.MpDeviceLoader`/`ParallelLoader.per_device_loader` (or calling `next()` on one),
`xm.optimizer_step(opt, barrier=True)`, `with torch_xla.step():`, calling a
`torch_xla.compile`d function, also in helper functions the loop calls.

**Not flagged**: loops without `.backward()` (evaluation), scripts whose loop is run by
HF `Trainer`/`accelerate` (they sync), a micro-batch loop inside a `torch_xla.compile`d
function or a `with torch_xla.step():` block.

**Fix** (safe): append `torch_xla.sync()` (`xm.mark_step()` for targets before 2.4) as
the last statement of the step-loop body, so it runs on every iteration. A `continue`
in the body skips it on that iteration (the next sync then covers both).

```python
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    torch_xla.sync()  # added
```
"""

    VALID = [
        # Fed by an MpDeviceLoader: every `next()` syncs.
        Valid("""
            import torch_xla.distributed.parallel_loader as pl
            loader = pl.MpDeviceLoader(train_loader, device)
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
        """),
        # The device loader reaches the loop through a parameter.
        Valid("""
            import torch_xla.distributed.parallel_loader as pl
            def train_loop(loader):
                for step, (x, y) in enumerate(loader):
                    model(x).sum().backward()
            train_loop(pl.ParallelLoader(train_loader, [device]).per_device_loader(device))
        """),
        Valid("""
            import torch
            import torch_xla
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
                torch_xla.sync()
        """),
        Valid("""
            import torch_xla
            for x, y in loader:
                with torch_xla.step():
                    model(x, y).backward()
                    opt.step()
        """),
        Valid("""
            import torch_xla
            @torch_xla.compile
            def train_step(x, y):
                model(x, y).backward()
                opt.step()
            for x, y in loader:
                train_step(x, y)
        """),
        Valid("""
            import torch_xla.core.xla_model as xm
            for x, y in loader:
                model(x, y).backward()
                xm.optimizer_step(opt, barrier=True)
        """),
        # The sync is in a helper the loop calls.
        Valid("""
            from torch_xla.core import xla_model
            def finish_step(opt):
                opt.step()
                xla_model.mark_step()
            for x, y in loader:
                model(x, y).backward()
                finish_step(opt)
        """),
        # An evaluation loop: no backward.
        Valid("""
            import torch
            with torch.no_grad():
                for x, y in loader:
                    total += (model(x).argmax(-1) == y).sum()
        """),
        # HF Trainer drives the loop.
        Valid("""
            import torch
            from transformers import Trainer
            for x in data:
                model(x).backward()
            Trainer(model=model).train()
        """),
        # The epoch loop is not the step loop; the batch loop syncs.
        Valid("""
            import torch_xla
            for epoch in range(3):
                for x, y in loader:
                    model(x, y).backward()
                    torch_xla.sync()
        """),
        # Not in scope: never imports torch.
        Valid("""
            for x in data:
                x.backward()
        """),
        # A subclass of a trainer from another module overrides its per-epoch loop;
        # the base class calls it with its device loader (here rebound through islice):
        # nothing in this file says it is not one.
        Valid("""
            import itertools
            import torch
            from my_trainers import BaseTrainer

            class MyTrainer(BaseTrainer):
                def epoch(self, batches, n):
                    batches = itertools.islice(batches, n)
                    for x, y in batches:
                        self.loss(x, y).backward()
                        self.opt.step()
        """),
        # A loader parameter rebound from itself still holds what the callers pass.
        Valid("""
            import itertools
            import torch
            import torch_xla.distributed.parallel_loader as pl

            def run(batches, n):
                batches = itertools.islice(batches, n)
                for x, y in batches:
                    model(x, y).backward()

            run(pl.MpDeviceLoader(data, dev), 10)
        """),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
            """,
            fixed="""
            import torch
            import torch_xla
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
                torch_xla.sync()
            """,
            count=1,
        ),
        # A pure CUDA script gets the sync and the import it needs.
        Invalid(
            """
            import torch
            for epoch in range(3):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()
            """,
            fixed="""
            import torch
            import torch_xla

            for epoch in range(3):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()
                    torch_xla.sync()
            """,
            count=1,
        ),
        # Gradient accumulation: the only sync is every k micro-steps.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                if (i + 1) % k == 0:
                    opt.step()
                    xm.mark_step()
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            import torch_xla

            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                if (i + 1) % k == 0:
                    opt.step()
                    xm.mark_step()
                torch_xla.sync()
            """,
            count=1,
        ),
        # Older target: xm.mark_step(); the backward is in a helper; a while loop.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            def train_step(batch):
                loss = model(batch)
                loss.backward()
                opt.step()
            step = 0
            while step < max_steps:
                train_step(next(it))
                step += 1
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            def train_step(batch):
                loss = model(batch)
                loss.backward()
                opt.step()
            step = 0
            while step < max_steps:
                train_step(next(it))
                step += 1
                xm.mark_step()
            """,
            count=1,
            target_version="2.3",
        ),
        # The body ends with `continue`: the sync goes before it.
        Invalid(
            """
            import torch
            for x in data:
                model(x).backward()
                continue
            """,
            fixed="""
            import torch
            import torch_xla

            for x in data:
                model(x).backward()
                torch_xla.sync()
                continue
            """,
        ),
        # Rebound through islice, but the only caller passes a plain DataLoader.
        Invalid(
            """
            import itertools
            import torch

            def run(batches, n):
                batches = itertools.islice(batches, n)
                for x, y in batches:
                    model(x, y).backward()

            run(torch.utils.data.DataLoader(data), 10)
            """,
            fixed="""
            import itertools
            import torch
            import torch_xla

            def run(batches, n):
                batches = itertools.islice(batches, n)
                for x, y in batches:
                    model(x, y).backward()
                    torch_xla.sync()

            run(torch.utils.data.DataLoader(data), 10)
            """,
        ),
        # A subclass of a torch class (nn.Module) is not an opaque trainer.
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def fit(self, batches):
                    for x, y in batches:
                        self.loss(x, y).backward()
            """,
            fixed="""
            import torch
            import torch_xla

            class Net(torch.nn.Module):
                def fit(self, batches):
                    for x, y in batches:
                        self.loss(x, y).backward()
                        torch_xla.sync()
            """,
        ),
    ]

    def finish(self) -> None:
        if uses_syncing_library(self.ctx.semantic):
            return  # HF Trainer / accelerate sync for the script
        for loop in self.ctx.steps.loops:
            if self._delimited_elsewhere(loop):
                continue
            points = loop.sync_points()
            if not points:
                message = "training step loop with no sync point: the lazy graph grows across iterations"
            elif not loop.syncs_every_iteration():
                message = (
                    "training step loop syncs only every few iterations (under an every-N-steps guard): "
                    "the graph spans several micro-steps"
                )
            else:
                continue
            self.report(loop.node, self._with_continue_note(loop, message), fix=self._fix(loop))

    def _delimited_elsewhere(self, loop: StepLoop) -> bool:
        """A micro-batch loop inside a ``torch_xla.compile``d function, or inside a
        ``with torch_xla.step():`` that is itself in a loop: the user delimited the step."""
        steps = self.ctx.steps
        node: ast.AST | None = loop.node
        inside_step_context = False
        while node is not None:
            node = getattr(node, "parent", None)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and steps.is_compiled_function(node):
                return True
            if isinstance(node, (ast.With, ast.AsyncWith)) and any(steps.is_step_context(i) for i in node.items):
                inside_step_context = True
            elif inside_step_context and isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                return True
        return False

    def _fix(self, loop: StepLoop):
        sync, imports = self.ctx.xla_api("sync", "mark_step")
        code = f"{sync}()"
        last = loop.node.body[-1]
        if isinstance(last, _JUMPS):
            operation = InsertStatement(self.ctx.span(last), code, "before")
        else:
            operation = AppendToBody(self.ctx.header_span(loop.node), code)
        return self.fix("safe", f"Append `{code}` to the loop body", operation, imports=imports)

    def _with_continue_note(self, loop: StepLoop, message: str) -> str:
        lines = sorted({node.lineno for node in _own_continues(loop.node)})
        if loop.node.body and isinstance(loop.node.body[-1], ast.Continue):
            lines = [line for line in lines if line != loop.node.body[-1].lineno]
        if not lines:
            return message
        where = ", ".join(str(line) for line in lines)
        return f"{message} (note: `continue` on line {where} skips a sync appended at the end of the body)"


def _own_continues(loop: ast.AST):
    """The ``continue`` statements that belong to ``loop`` (not to nested loops or functions)."""
    stack = list(loop.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Continue):
            yield node
        if isinstance(
            node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            continue
        stack.extend(ast.iter_child_nodes(node))
