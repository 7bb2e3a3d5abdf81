"""XLA203 missing-gradient-allreduce: a multi-process XLA script that steps the
optimizer without all-reducing the gradients.

Every process computes gradients on its own batches. Unless they are all-reduced
before the step (``xm.optimizer_step(opt)`` does it, as do ``xm.reduce_gradients`` and
``xm.all_reduce`` of ``xm._fetch_gradients(opt)``), each process trains its own model.
"""

from __future__ import annotations

import ast

from xlalint.linter.distributed import OptimizerStep, world_api
from xlalint.linter.model import InsertStatement, ReplaceExpr
from xlalint.linter.order import Kind
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.semantic import enclosing_function


class MissingGradientAllreduce(Rule):
    code = "XLA203"
    name = "missing-gradient-allreduce"
    summary = "The optimizer steps without all-reducing the gradients across processes"
    explanation = """
## Why

In a multi-process XLA script every process runs the training step on its own batches
and holds its own gradients. `opt.step()` then updates each process's model with its
own gradients only: the models drift apart and the run trains N different models. The
XLA way is `xm.optimizer_step(opt)`, which all-reduces (averages) the gradients and
then steps; with a `GradScaler`, all-reduce them right after the backward.

## What is flagged

In a multi-process XLA script (one that spawns or launches itself, defines `_mp_fn`,
calls `dist.init_process_group("xla")` or `xr.world_size()`/`xr.global_ordinal()`;
not SPMD, not an HF Trainer/accelerate loop): a path through the step that reaches
`opt.step()` or `scaler.step(opt)` with no `xm.optimizer_step`, `xm.reduce_gradients(opt)` or
`xm.all_reduce` of the gradients since the backward. Paths are taken one at a time:
`if use_xla: xm.optimizer_step(opt) else: opt.step()` flags the `else`. Not flagged:
a model wrapped in DDP or FSDP (they reduce in backward), `MpModelWrapper`, torch_xla's
`ZeroRedundancyOptimizer` (its `step()` reduce-scatters the gradients), and scripts
that call something named like a gradient all-reduce the analysis does not model
(`dist.all_reduce(p.grad)`, `average_gradients(model)`).

## Fix

- safe: `opt.step()` -> `xm.optimizer_step(opt)` (a closure argument becomes
  `optimizer_args={"closure": ...}`), when no other path reduces before the same call;
- unsafe, with a scaler: insert
  `xm.all_reduce("sum", xm._fetch_gradients(opt), scale=1.0 / xr.world_size())` right
  after the backward (before `unscale_` and clipping).

## Example

```python
loss.backward()
opt.step()
```
becomes
```python
loss.backward()
xm.optimizer_step(opt)
```
"""
    fix_availability = "sometimes"

    VALID = [
        Valid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for x, y in loader:
                    model(x, y).backward()
                    xm.optimizer_step(opt)
            """
        ),
        # Reduced by hand before the step; with a scaler, right after the backward.
        Valid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            def _mp_fn(index):
                for x, y in loader:
                    if use_amp:
                        scaler.scale(model(x, y)).backward()
                        xm.all_reduce("sum", xm._fetch_gradients(opt), scale=1.0 / xr.world_size())
                        scaler.step(opt)
                        scaler.update()
                    else:
                        model(x, y).backward()
                        xm.reduce_gradients(opt)
                        opt.step()
            """
        ),
        # One process: opt.step() is right.
        Valid(
            """
            import torch_xla
            for x, y in loader:
                model(x, y).backward()
                opt.step()
            """
        ),
        # ZeRO-1: the optimizer's own step reduce-scatters the gradients.
        Valid(
            """
            import torch_xla.core.xla_model as xm
            from torch_xla.distributed.zero_redundancy_optimizer import ZeroRedundancyOptimizer
            def _mp_fn(index):
                opt = ZeroRedundancyOptimizer(model.parameters(), torch.optim.SGD, lr=0.1)
                for x, y in loader:
                    model(x, y).backward()
                    opt.step()
            """
        ),
        # DDP reduces in backward.
        Valid(
            """
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP
            import torch_xla.distributed.xla_backend
            def _mp_fn(index):
                dist.init_process_group("xla", init_method="xla://")
                model = DDP(net)
                for x, y in loader:
                    model(x, y).backward()
                    opt.step()
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    loss = model(x, y)
                    loss.backward()
                    opt.step()
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    opt.zero_grad()
                    loss = model(x, y)
                    loss.backward()
                    xm.optimizer_step(opt)
            """,
            count=1,
        ),
        # A closure, in a helper the loop calls; xm is imported for the fix.
        Invalid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            def step(batch):
                def closure():
                    return model(batch).backward()
                self.optimizer.step(closure)
            print(xr.world_size())
            for batch in loader:
                model(batch).backward()
                step(batch)
            """,
            fixed="""
            import torch_xla
            import torch_xla.runtime as xr
            import torch_xla.core.xla_model as xm

            def step(batch):
                def closure():
                    return model(batch).backward()
                xm.optimizer_step(self.optimizer, optimizer_args={"closure": closure})
            print(xr.world_size())
            for batch in loader:
                model(batch).backward()
                step(batch)
            """,
            count=1,
        ),
        # The path without XLA steps without reducing; another path reduces before the
        # same call, so replacing it would reduce twice there: reported, no fix.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for x, y in loader:
                    model(x, y).backward()
                    if args.tpu:
                        xm.reduce_gradients(opt)
                    opt.step()
            """,
            count=1,
        ),
        # With a GradScaler: the all-reduce goes right after the backward (unsafe).
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                scaler = torch.amp.GradScaler()
                for x, y in loader:
                    scaler.scale(model(x, y)).backward()
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(opt)
                    scaler.update()
            """,
            unsafe_fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr

            def _mp_fn(index):
                scaler = torch.amp.GradScaler()
                for x, y in loader:
                    scaler.scale(model(x, y)).backward()
                    xm.all_reduce("sum", xm._fetch_gradients(opt), scale=1.0 / xr.world_size())
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(opt)
                    scaler.update()
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        distributed = self.ctx.distributed
        if (
            not distributed.data_parallel
            or distributed.wraps_model
            or distributed.optimizer_reduces
            or distributed.reduces_by_hand
        ):
            return
        for step in distributed.optimizer_steps:
            if not step.unreduced:
                continue
            call = step.event.call
            what = self.ctx.source_of(call.func) + "(...)"
            where = " on some paths through the step" if step.reduced_somewhere else ""
            remedy = "all-reduce them first (`xm.optimizer_step(opt)`)"
            if step.event.kind is Kind.SCALER_STEP:
                remedy = "all-reduce them right after the backward (`xm.all_reduce` of `xm._fetch_gradients(opt)`)"
            message = f"`{what}` uses this process's gradients only{where}: each process trains its own model; {remedy}"
            if step.event.kind is Kind.SCALER_STEP:
                fix = self._scaler_fix(step)
            else:
                fix = self._optimizer_step_fix(step)
            self.report(call, message, fix=fix)

    def _optimizer_step_fix(self, step: OptimizerStep):
        call, optimizer = step.event.call, step.event.optimizer
        if step.reduced_somewhere or optimizer is None:
            return None
        parts = [("opt", self.ctx.span(optimizer))]
        closure: ast.expr | None = None
        if len(call.args) == 1 and not call.keywords and not isinstance(call.args[0], ast.Starred):
            closure = call.args[0]
        elif not call.args and len(call.keywords) == 1 and call.keywords[0].arg == "closure":
            closure = call.keywords[0].value
        elif call.args or call.keywords:
            return None
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        template = f"{xm}.optimizer_step({{opt}})"
        if closure is not None:
            template = f'{xm}.optimizer_step({{opt}}, optimizer_args={{{{"closure": {{closure}}}}}})'
            parts.append(("closure", self.ctx.span(closure)))
        return self.fix(
            "safe",
            "step with `xm.optimizer_step`, which all-reduces the gradients first",
            ReplaceExpr(self.ctx.span(call), template, tuple(parts)),
            imports=imports,
        )

    def _scaler_fix(self, step: OptimizerStep):
        optimizer = step.event.optimizer
        backward = step.last_backward()
        if (
            step.reduced_somewhere
            or optimizer is None
            or backward is None
            or enclosing_function(backward.call) is not enclosing_function(step.event.call)
            or not isinstance(backward.stmt, ast.Expr)
        ):
            return None
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        world, _rank, world_imports = world_api(self.ctx)
        return self.fix(
            "unsafe",
            "all-reduce the gradients right after the backward",
            InsertStatement(
                self.ctx.span(backward.stmt),
                f'{xm}.all_reduce("sum", {xm}._fetch_gradients({{opt}}), scale=1.0 / {world})',
                "after",
                (("opt", self.ctx.span(optimizer)),),
            ),
            imports=(*imports, *world_imports),
        )
