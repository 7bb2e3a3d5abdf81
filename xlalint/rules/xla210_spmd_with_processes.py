"""XLA210 spmd-with-processes: SPMD mixed with the per-process (data-parallel) APIs.

Under SPMD (``xr.use_spmd()``) one process drives every device of the host and the
compiler shards the work; the per-process APIs assume one process per device. Mixed,
they see a world of one process: the all-reduces do nothing, a ``DistributedSampler``
of ``xr.world_size()`` replicas gives the one process the whole dataset.
"""

from __future__ import annotations

import ast

from xlalint.analysis.distributed import mentions_gradients
from xlalint.analysis.own_step import own_step_fix, stepped_optimizer
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import Fix

XM = "torch_xla.core.xla_model"
OPTIMIZER_STEP = f"{XM}.optimizer_step"
GRADIENT_REDUCTIONS = frozenset({f"{XM}.reduce_gradients", f"{XM}.all_reduce"})
DISTRIBUTED_SAMPLERS = frozenset(
    {"torch.utils.data.distributed.DistributedSampler", "torch.utils.data.DistributedSampler"}
)
WORLD_SIZE = frozenset({"torch_xla.runtime.world_size", f"{XM}.xrt_world_size"})


class SpmdWithProcesses(Rule):
    code = "XLA210"
    name = "spmd-with-processes"
    summary = "SPMD (`xr.use_spmd()`) mixed with per-process launches or APIs"
    explanation = """
## Why

`xr.use_spmd()` switches torch_xla to SPMD: one process per host drives all its
devices through one virtual device, and the compiler shards each tensor as annotated
(`xs.mark_sharding`, FSDPv2). The data-parallel APIs assume the opposite, one process
per device:

- `xmp.spawn`/`torch_xla.launch` start one process per device, each of which would try
  to drive every device;
- under SPMD `xr.world_size()` is 1 (torch_xla 2.9 `runtime.world_size()` returns 1 when
  there are no replication devices), so `xm.optimizer_step`, `xm.reduce_gradients` and
  an `xm.all_reduce` of the gradients reduce over one process (the gradients are global
  already), and `DistributedSampler(num_replicas=xr.world_size(), ...)` gives the one
  process the whole dataset, as one replica: the script trains on a world size of 1
  while it believes it is data-parallel.

`xr.use_spmd()` called after an XLA tensor or the device was made replicates those
tensors to every device (torch_xla's `use_spmd` docstring: "This forces SPMD mode if
some tensors are already initialized on non-SPMD devices. This means that those tensors
would be replicated across the devices"; it warns). Not observable on one CPU device:
checked statically.

## What is flagged

In a file that calls `xr.use_spmd()` (not in the other branch of an `if`): a launch of
workers (`xmp.spawn`, `torch_xla.launch`); `xm.optimizer_step` (unless its optimizer is
an FSDP model's: that is XLA209's); `xm.reduce_gradients`; `xm.all_reduce` of
gradients; a `DistributedSampler` whose `num_replicas` asks for the world size; and the
`xr.use_spmd()` call itself when the process made an XLA tensor or asked for the device
before it.

## Fix

safe: `xm.optimizer_step(opt)` -> `opt.step()` (`optimizer_args=a` -> `opt.step(**a)`).
None otherwise: run the SPMD script as one process per host; drop the per-process
reductions; shard the batch with `xs.mark_sharding` instead of a `DistributedSampler`;
call `xr.use_spmd()` first thing.

## Example

```python
xr.use_spmd()
...
loss.backward()
xm.optimizer_step(opt)
```
becomes
```python
xr.use_spmd()
...
loss.backward()
opt.step()
```
"""
    fix_availability = "sometimes"

    VALID = [
        # SPMD as documented: use_spmd first, shard, step the optimizer itself.
        Valid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            xr.use_spmd()
            device = torch_xla.device()
            for x in loader:
                model(x).backward()
                opt.step()
                torch_xla.sync()
            """
        ),
        # SPMD and multi-process in different branches.
        Valid(
            """
            import torch_xla.runtime as xr
            import torch_xla.distributed.xla_multiprocessing as xmp
            if args.spmd:
                xr.use_spmd()
                train_spmd()
            else:
                xmp.spawn(_mp_fn)
            """
        ),
        # No SPMD: the per-process APIs are right.
        Valid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for x in loader:
                    model(x).backward()
                    xm.optimizer_step(opt)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            xr.use_spmd()
            for x in loader:
                model(x).backward()
                xm.optimizer_step(opt)
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            xr.use_spmd()
            for x in loader:
                model(x).backward()
                opt.step()
            """,
            count=1,
        ),
        # A launch, a sampler of world_size() replicas, a gradient reduction: no fix.
        Invalid(
            """
            import torch_xla
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            from torch.utils.data.distributed import DistributedSampler
            def _mp_fn(index):
                xr.use_spmd()
                sampler = DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal())
                for x in loader:
                    model(x).backward()
                    xm.reduce_gradients(opt)
                    opt.step()
            if __name__ == "__main__":
                torch_xla.launch(_mp_fn)
            """,
            count=3,
        ),
        # use_spmd after the device was made: tensors made so far are replicated.
        Invalid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            def main():
                model = Net().to(torch_xla.device())
                xr.use_spmd()
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        parallelism = self.ctx.parallelism
        if not parallelism.spmd:
            return
        found: list[tuple[ast.Call, str, Fix | None]] = []
        for launch in parallelism.launches:
            spmd = parallelism.spmd_at(launch)
            if spmd is not None:
                message = (
                    f"`xr.use_spmd()` (line {spmd.lineno}) drives every device from one process, but "
                    f"`{self.ctx.source_of(launch.func)}` starts one per device"
                )
                found.append((launch, message, None))
        for call in self.ctx.semantic.calls_of("optimizer_step", "reduce_gradients", "all_reduce"):
            spmd = parallelism.spmd_at(call)
            if spmd is None:
                continue
            name = self.ctx.semantic.call_name(call)
            if name == OPTIMIZER_STEP:
                if parallelism.fsdp_model_of_optimizer(stepped_optimizer(call)) is None:
                    fix = own_step_fix(call, self.ctx.span, "under SPMD the gradients are global")
                    found.append((call, self._reduce_message(call, spmd), fix))
            elif name in GRADIENT_REDUCTIONS and (name != f"{XM}.all_reduce" or mentions_gradients(call)):
                found.append((call, self._reduce_message(call, spmd), None))
        for call in self.ctx.semantic.calls_of("DistributedSampler"):
            replicas = next((k.value for k in call.keywords if k.arg == "num_replicas"), None)
            spmd = parallelism.spmd_at(call)
            if (
                spmd is not None
                and self.ctx.semantic.call_name(call) in DISTRIBUTED_SAMPLERS
                and self._asks_world_size(replicas)
            ):
                message = (
                    f"under SPMD (line {spmd.lineno}) `xr.world_size()` is 1: this sampler gives one process "
                    "the whole dataset"
                )
                found.append((call, message, None))
        for spmd in parallelism.use_spmd_calls:
            made = next((c for c in self.ctx.launch.calls_before(spmd) if self.ctx.launch.starts_runtime(c)), None)
            if made is not None:
                message = (
                    f"`xr.use_spmd()` follows `{self.ctx.source_of(made.func)}(...)` (line {made.lineno}): "
                    "what that made is replicated to every device"
                )
                found.append((spmd, message, None))
        for node, message, fix in sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset)):
            self.report(node, message, fix=fix)

    def _reduce_message(self, call: ast.Call, spmd: ast.Call) -> str:
        return (
            f"`{self.ctx.source_of(call.func)}` reduces across processes, but under SPMD (line {spmd.lineno}) "
            "one process holds the global gradients"
        )

    def _asks_world_size(self, expr: ast.expr | None) -> bool:
        return expr is not None and any(
            isinstance(n, ast.Call) and self.ctx.semantic.call_name(n) in WORLD_SIZE for n in ast.walk(expr)
        )
