"""XLA103 missing-sync: a training step loop, or a loop that reads device state it carries, that never cuts the lazy graph."""

from __future__ import annotations

import ast

from xlalint.analysis.scripts import uses_syncing_library
from xlalint.analysis.steps import StepLoop
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import Fix
from xlalint.rules.xla103 import carried_state
from xlalint.rules.xla103.sync_fix import guarded_sync, sync_fix


class MissingSync(Rule):
    code = "XLA103"
    name = "missing-sync"
    summary = "training step loop, or a loop reading device state it carries, with no sync point"
    fix_availability = "safe"
    explanation = """
torch_xla records operations lazily and compiles and runs the graph only at a *sync
point*. A training loop with none keeps extending one graph across iterations: memory
grows, nothing runs until something reads a value, and each read compiles a new, ever
larger graph.

**Flagged**: the step loop (the innermost loop that calls `.backward()`, directly or
through functions of the same file) when its step has no sync point, or when its only
sync is under a gradient-accumulation guard (`if (i + 1) % k == 0:`): the graph then
spans k micro-steps. Where that innermost loop runs micro-batches and steps no optimizer
(`for micro in batch.split(n): loss.backward()`), the step is the loop around it that runs
the optimizer step, also through functions (improved-diffusion's `run_loop` `while`
calling `run_step` -> `forward_backward` and `optimize`): that loop is flagged, and its
sync goes after the optimizer step. A call of a helper that runs the backward counts
(an object whose `__call__` does, timm's `NativeScaler` `loss_scaler(loss, opt)`,
`accelerator.backward(loss)`), also when the helper comes in as a parameter: DeiT's
`train_one_epoch(..., loss_scaler, ...)` calling `loss_scaler(loss, optimizer, ...)`, a
`train(model, loader, step_fn=update)` calling `step_fn(loss)`. Such a call runs what the
calls of the function in the same file pass for the parameter (an object of a class with
a `__call__`, a timm `NativeScaler`, a function, the parameter's default where a call
leaves it out, a parameter of the caller passed on); the loop is a step when any of them runs a backward: it trains
on those calls (a sync on the others, evaluation, costs little). The same for a callable
an object holds (`self.loss_scaler(loss, opt)`, where `__init__` keeps the `loss_scaler`
its construction passes, or builds one). A parameter no call in the file binds (a
library's entry point) is not followed.

Sync points: `torch_xla.sync()` (`xm.mark_step()` before 2.4), iterating a
`pl.MpDeviceLoader`/`ParallelLoader.per_device_loader` (or calling `next()` on one),
`xm.optimizer_step(opt, barrier=True)`, `with torch_xla.step():`, calling a
`torch_xla.compile`d function, also in helper functions the loop calls.

**Also flagged**, in an XLA script (one that imports torch_xla, or will once XLA104's
port is applied): a loop that does not train (evaluation, sampling) but carries device
tensors from one iteration to the next (`total += loss`, `correct += (pred == y).sum()`,
`x = model(x)`) and reads that state on the host in every iteration
(`print(total.item())`, an f-string of `total / n`, `if total > limit:`), with no sync
point. Each read compiles the state's graph, one iteration longer than at the last read.

**Not flagged**: scripts whose loop is run by HF `Trainer`/`accelerate` (they sync), a
micro-batch loop inside a `torch_xla.compile`d function or a `with torch_xla.step():`
block; what each iteration binds anew, the loop variable and its attributes too
(`for p in model.parameters(): p.data = p.data.to(device)` carries nothing); and the
loops without `.backward()` where a sync was measured not to help:

| loop without `.backward()` (10 iterations, torch_xla 2.9.0 CPU, 1-layer GPT-2) | compiles, no sync | with a sync per iteration |
|---|---|---|
| carried `total += loss`, `print(total.item())` each iteration (flagged) | 12 | 5 |
| carried `total = total + loss`, only `loss.item()` read each iteration (nanoGPT's `estimate_loss`, `losses[k] = loss.item()`) | 4 | 4, and 8 more executions |
| carried `total += loss`, read once after the loop | 3 | 3, and 8 more executions |
| `losses[k] = loss` into a device tensor (the index is a constant of each graph) | 3 | 11 |
| sampling, `idx = torch.cat((idx, nxt), 1)` (cropped to the block or not) | 1 | 10 |
| the same with `if nxt.item() == eos: break` | 11 | 20 |

A state that grows in shape (`torch.cat`, `torch.stack`) compiles one graph per length
once synced; with a read per iteration the sync splits each into two graphs (fewer
seconds compiling, 56 s instead of 158 s, but more compiles), so it is left alone.

**Fix** (safe): a sync on every path that ends the step. `torch_xla.sync()`
(`xm.mark_step()` for targets before 2.4) is appended as the last statement of the
step-loop body, and inserted right before each `break`, `continue` or `return` that
leaves the step after its work began (`if args.dry_run: break`): without it, that path
never syncs, step closures never run, and whatever reads a tensor next (a
`torch.save`) traces the whole unsynced graph. A jump on the line of its `if`
(`if done: break`) gets the sync before the `if`. A jump before the statement that
reaches `.backward()` (`if batch is None: continue`) skips a step that has not started
and gets none. (A `try`/`finally` around the body was the alternative: it also syncs
while an exception propagates, and it re-indents the user's whole loop.) When the
step's only sync is a statement of its own under the gradient-accumulation guard, that
sync is moved to the end of the body instead: the same graphs, without a second sync on
the steps that apply the gradients.

```python
for i, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if args.dry_run:
        torch_xla.sync()  # added
        break
    torch_xla.sync()  # added
```

The loop that carries state gets the same fix, with jumps counted from the first
statement that touches the state. It is safe: a sync cannot change a value, only where
the graph is cut, and the loop is flagged only where the cut was measured to save
compiles. Under a test that differs between processes (`if xm.is_master_ordinal():`)
there is no fix: a sync only some processes run is XLA207's hang. Sync on every process
(before the test), or read the state once, after the loop.

```python
for k, (x, y) in enumerate(val_loader):
    total += loss_fn(model(x.to(device)), y.to(device))
    print(f"batch {k}: mean loss {total.item() / (k + 1):.4f}")
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
        # An evaluation loop that reads its carried state, and syncs every iteration.
        Valid("""
            import torch_xla
            total = 0
            for k, (x, y) in enumerate(loader):
                total += model(x.to(device), y.to(device))
                print(total.item() / (k + 1))
                torch_xla.sync()
        """),
        # ... or is fed by a device loader.
        Valid("""
            import torch_xla.distributed.parallel_loader as pl
            total = 0
            for x, y in pl.MpDeviceLoader(val_loader, device):
                total += model(x, y)
                print(f"{total}")
        """),
        # The state is a host value: `.item()` each iteration compiles one fixed graph.
        Valid("""
            import torch_xla
            total = 0.0
            for x, y in loader:
                total += model(x.to(device), y.to(device)).item()
                print(total)
        """),
        # nanoGPT's estimate_loss: only the iteration's own loss is read (4 compiles
        # either way; a sync would run the pending state once more per iteration).
        Valid("""
            import torch
            import torch_xla
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch("val")
                logits, loss = model(X, Y)
                losses[k] = loss.item()
        """),
        # The state is read once, after the loop: one graph either way.
        Valid("""
            import torch_xla
            correct = 0
            for x, y in loader:
                correct += (model(x.to(device)).argmax(-1) == y.to(device)).sum()
            print(correct.item())
        """),
        # Sampling: the state grows in shape, so a sync compiles one graph per length
        # (20 compiles instead of 11 with the read below).
        Valid("""
            import torch
            import torch_xla
            for _ in range(max_new_tokens):
                logits = model(idx[:, -block_size:])
                idx_next = torch.multinomial(torch.softmax(logits[:, -1, :], dim=-1), 1)
                idx = torch.cat((idx, idx_next), dim=1)
                if idx_next.item() == eos:
                    break
        """),
        # The callable passed in runs no backward; the one of `fit` is bound by no call.
        Valid("""
            import torch
            import torch_xla

            class Meter:
                def __call__(self, value):
                    self.values.append(value)

            def evaluate(model, loader, record):
                for x, y in loader:
                    record(model(x.to(device), y.to(device)))

            def fit(model, loader, step):
                for x, y in loader:
                    step(model(x.to(device), y.to(device)))

            def main():
                evaluate(model, loader, Meter())
        """),
        # Not an XLA script: on CUDA or the CPU nothing is compiled.
        Valid("""
            import torch
            total = 0
            for x, y in loader:
                total += model(x.to(device), y.to(device))
                print(total.item())
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
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                if (i + 1) % k == 0:
                    opt.step()
                xm.mark_step()
            """,
            count=1,
        ),
        # The guard's sync shares its block with nothing else: a sync is appended.
        Invalid(
            """
            import torch_xla
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                opt.step()
                if (i + 1) % k == 0:
                    torch_xla.sync()
            """,
            fixed="""
            import torch_xla
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                opt.step()
                if (i + 1) % k == 0:
                    torch_xla.sync()
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
        # A dry-run `break` ends the step too: it gets a sync of its own.
        Invalid(
            """
            import torch
            import torch_xla
            for i, (x, y) in enumerate(loader):
                loss_fn(model(x), y).backward()
                opt.step()
                if args.dry_run:
                    break
            torch.save(model.state_dict(), "model.pt")
            """,
            fixed="""
            import torch
            import torch_xla
            for i, (x, y) in enumerate(loader):
                loss_fn(model(x), y).backward()
                opt.step()
                if args.dry_run:
                    torch_xla.sync()
                    break
                torch_xla.sync()
            torch.save(model.state_dict(), "model.pt")
            """,
            count=1,
        ),
        # `xm` means something else here: the import gets a fresh alias.
        Invalid(
            """
            import torch
            xm = 5
            for x in data:
                model(x).backward()
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm_1

            xm = 5
            for x in data:
                model(x).backward()
                xm_1.mark_step()
            """,
            target_version="2.3",
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
        # The backward runs in a scaler object the caller passes (DeiT's `train_one_epoch`).
        Invalid(
            """
            import torch
            import torch_xla

            class NativeScaler:
                def __call__(self, loss, optimizer):
                    loss.backward()
                    optimizer.step()

            def train_one_epoch(model, loader, optimizer, loss_scaler):
                for x, y in loader:
                    loss = model(x.to(device), y.to(device))
                    loss_scaler(loss, optimizer)

            def main():
                loss_scaler = NativeScaler()
                train_one_epoch(model, loader, optimizer, loss_scaler)
            """,
            fixed="""
            import torch
            import torch_xla

            class NativeScaler:
                def __call__(self, loss, optimizer):
                    loss.backward()
                    optimizer.step()

            def train_one_epoch(model, loader, optimizer, loss_scaler):
                for x, y in loader:
                    loss = model(x.to(device), y.to(device))
                    loss_scaler(loss, optimizer)
                    torch_xla.sync()

            def main():
                loss_scaler = NativeScaler()
                train_one_epoch(model, loader, optimizer, loss_scaler)
            """,
            count=1,
        ),
        # ... or in a step function passed by keyword.
        Invalid(
            """
            import torch
            import torch_xla

            def update(loss, optimizer):
                loss.backward()
                optimizer.step()

            def train(model, loader, optimizer, step_fn):
                for x, y in loader:
                    step_fn(model(x.to(device), y.to(device)), optimizer)

            def main():
                train(model, loader, optimizer, step_fn=update)
            """,
            fixed="""
            import torch
            import torch_xla

            def update(loss, optimizer):
                loss.backward()
                optimizer.step()

            def train(model, loader, optimizer, step_fn):
                for x, y in loader:
                    step_fn(model(x.to(device), y.to(device)), optimizer)
                    torch_xla.sync()

            def main():
                train(model, loader, optimizer, step_fn=update)
            """,
            count=1,
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
        # An evaluation loop that reads the device state it carries every iteration.
        Invalid(
            """
            import torch
            import torch_xla
            total = torch.zeros((), device=device)
            with torch.no_grad():
                for k, (x, y) in enumerate(val_loader):
                    total = total + loss_fn(model(x.to(device)), y.to(device))
                    print(f"batch {k}: mean loss {total.item() / (k + 1):.4f}")
            """,
            fixed="""
            import torch
            import torch_xla
            total = torch.zeros((), device=device)
            with torch.no_grad():
                for k, (x, y) in enumerate(val_loader):
                    total = total + loss_fn(model(x.to(device)), y.to(device))
                    print(f"batch {k}: mean loss {total.item() / (k + 1):.4f}")
                    torch_xla.sync()
            """,
            count=1,
        ),
        # Accuracy tested against a limit; a jump after the state's first update gets a sync.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            def evaluate(batches):
                correct = 0
                for x, y in batches:
                    if x is None:
                        continue
                    correct += (model(x).argmax(-1) == y).sum()
                    if correct > 100:
                        break
                return correct
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            def evaluate(batches):
                correct = 0
                for x, y in batches:
                    if x is None:
                        continue
                    correct += (model(x).argmax(-1) == y).sum()
                    if correct > 100:
                        xm.mark_step()
                        break
                    xm.mark_step()
                return correct
            """,
            count=1,
            target_version="2.3",
        ),
    ]

    def finish(self) -> None:
        if uses_syncing_library(self.ctx.semantic):
            return  # HF Trainer / accelerate sync for the script
        reported: set[int] = set()
        for micro in self.ctx.steps.loops:
            if self._delimited_elsewhere(micro):
                continue
            # The step is the loop that runs the optimizer step: around micro-steps
            # (gradient accumulation), the loop whose iteration ends with the step.
            loop = micro.optimizer_loop or micro
            if id(loop) in reported:
                continue
            reported.add(id(loop))
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
            self.report(loop.node, message, fix=self._fix(loop))
        carried_state.check(self)

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

    def _fix(self, loop: StepLoop) -> Fix | None:
        """The sync fix; jumps before the statement that reaches ``.backward()`` skip a
        step that has not started (``if batch is None: continue``) and get none."""
        body = loop.node.body
        start = next((i for i, stmt in enumerate(body) if self.ctx.steps.reaches_backward([stmt])), 0)
        return sync_fix(self, loop.node, start, guarded_sync(loop))
