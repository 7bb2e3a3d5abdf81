"""XLA203 missing-gradient-allreduce: a multi-process XLA script that steps the
optimizer without all-reducing the gradients.

Every process computes gradients on its own batches. Unless they are all-reduced
before the step (``xm.optimizer_step(opt)`` does it, as do ``xm.reduce_gradients`` and
``xm.all_reduce`` of ``xm._fetch_gradients(opt)``), each process trains its own model.
"""

from __future__ import annotations

import ast

from xlalint.analysis.distributed import OptimizerStep, world_api
from xlalint.analysis.order import OPTIMIZER_STEP, Kind
from xlalint.analysis.semantic import enclosing_function
from xlalint.analysis.steps import optimizer_closure
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import InsertStatement, ReplaceExpr


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
`xm.all_reduce` of the gradients since the backward. A closure the step is given
(`opt.step(closure)`, as LBFGS needs) runs inside the step, so its backward counts as
coming right before the step, and `xm.optimizer_step(opt, optimizer_args={"closure": closure})`
is flagged too: it all-reduces, then the closure makes new gradients. Paths are taken one at a time:
`if use_xla: xm.optimizer_step(opt) else: opt.step()` flags the `else`. Not flagged:
a model wrapped in DDP or FSDP (they reduce in backward), torch_xla's FSDP in either
form and SPMD (`xr.use_spmd()`), where `xm.optimizer_step` would be wrong (XLA209,
XLA210), `MpModelWrapper`, torch_xla's
`ZeroRedundancyOptimizer` (its `step()` reduce-scatters the gradients), and scripts
that call something named like a gradient all-reduce the analysis does not model
(`dist.all_reduce(p.grad)`, `average_gradients(model)`).

## Fix

- safe: `opt.step()` -> `xm.optimizer_step(opt)`, when no other path reduces before
  the same call;
- unsafe, for a step given a closure `def`: insert `xm.reduce_gradients(opt)` right
  after the closure's backward. Unsafe because the optimizer decides how many times to
  call the closure: LBFGS stops early on a change in this process's loss, so processes
  can disagree on how many all-reduces they run;
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
        # The closure the step runs all-reduces what its backward made.
        Valid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for x, y in loader:
                    def closure():
                        opt.zero_grad()
                        loss = model(x, y)
                        loss.backward()
                        xm.reduce_gradients(opt)
                        return loss
                    opt.step(closure)
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
        # LBFGS: the step runs the closure, whose backward makes the gradients it uses.
        # The closure's def is in a helper the loop calls; xm is imported for the fix.
        Invalid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            def step(batch):
                def closure():
                    opt.zero_grad()
                    loss = model(batch)
                    loss.backward()
                    return loss
                opt.step(closure)
            print(xr.world_size())
            for batch in loader:
                step(batch)
            """,
            unsafe_fixed="""
            import torch_xla
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr

            def step(batch):
                def closure():
                    opt.zero_grad()
                    loss = model(batch)
                    loss.backward()
                    xm.reduce_gradients(opt)
                    return loss
                opt.step(closure)
            print(xr.world_size())
            for batch in loader:
                step(batch)
            """,
            count=1,
        ),
        # xm.optimizer_step all-reduces before it calls the closure. A lambda closure
        # has no statement to insert after: reported, no fix.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for x, y in loader:
                    xm.optimizer_step(opt, optimizer_args={"closure": lambda: model(x, y).backward()})
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
            or self.ctx.parallelism.wraps_model
            or distributed.optimizer_reduces
            or distributed.reduces_by_hand
        ):
            return
        for step in distributed.optimizer_steps:
            if not step.unreduced:
                continue
            call = step.event.call
            what = self.ctx.source_of(call.func) + "(...)"
            # Where to all-reduce is the fix's title and the explanation's.
            where = " on some paths" if step.reduced_somewhere else ""
            message = f"`{what}` steps on unreduced gradients{where}: each process trains its own model"
            closure = optimizer_closure(call, self.ctx.semantic)
            if closure is not None and self.ctx.semantic.call_name(call) in OPTIMIZER_STEP:
                message = f"`{what}` all-reduces before its closure's backward makes the gradients{where}"
            if step.event.kind is Kind.SCALER_STEP:
                fix = self._scaler_fix(step)
            elif closure is not None:
                fix = self._closure_fix(step, self.ctx.steps.closure_passed(call))
            else:
                fix = self._optimizer_step_fix(step)
            self.report(call, message, fix=fix)

    def _optimizer_step_fix(self, step: OptimizerStep):
        call, optimizer = step.event.call, step.event.optimizer
        if step.reduced_somewhere or optimizer is None or call.args or call.keywords:
            return None
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        return self.fix(
            "safe",
            "step with `xm.optimizer_step`, which all-reduces the gradients first",
            ReplaceExpr(self.ctx.span(call), f"{xm}.optimizer_step({{opt}})", (("opt", self.ctx.span(optimizer)),)),
            imports=imports,
        )

    def _closure_fix(self, step: OptimizerStep, closure: ast.FunctionDef | ast.AsyncFunctionDef | None):
        """``xm.reduce_gradients(opt)`` right after the backward in the closure the step
        runs, when the closure is a ``def`` beside the step call (it sees the same
        optimizer)."""
        if closure is None or enclosing_function(closure) is not enclosing_function(step.event.call):
            return None
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        code = f"{xm}.reduce_gradients({{opt}})"
        what = "all-reduce the gradients in the closure, right after its backward"
        return self._after_backward(step, closure, code, what, imports)

    def _scaler_fix(self, step: OptimizerStep):
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        world, _rank, world_imports = world_api(self.ctx)
        code = f'{xm}.all_reduce("sum", {xm}._fetch_gradients({{opt}}), scale=1.0 / {world})'
        what = "all-reduce the gradients right after the backward"
        return self._after_backward(step, enclosing_function(step.event.call), code, what, (*imports, *world_imports))

    def _after_backward(self, step: OptimizerStep, function: ast.AST | None, code: str, what: str, imports):
        """The unsafe fix that inserts ``code`` (``{opt}``: the step's optimizer) right after
        the backward that made the gradients ``step`` uses: when every path agrees on that
        backward, it is a statement of its own in ``function``, and no path reduces already."""
        optimizer, backward = step.event.optimizer, step.last_backward()
        if (
            step.reduced_somewhere
            or optimizer is None
            or backward is None
            or enclosing_function(backward.call) is not function
            or not isinstance(backward.stmt, ast.Expr)
        ):
            return None
        operation = InsertStatement(self.ctx.span(backward.stmt), code, "after", (("opt", self.ctx.span(optimizer)),))
        return self.fix("unsafe", what, operation, imports=imports)
