"""XLA202 missing-distributed-sampler: a multi-process XLA script whose training
``DataLoader`` gives every process the whole dataset.

Each process of ``xmp.spawn``/``torch_xla.launch`` builds its own loader. Without a
``DistributedSampler`` every one of them iterates all of the data: N processes do N
times the work per epoch, and the all-reduced gradients average N copies of the same
batches instead of N different ones.
"""

from __future__ import annotations

import ast

from xlalint.analysis.distributed import DISTRIBUTED_SAMPLER, DISTRIBUTED_SAMPLERS, world_api
from xlalint.analysis.semantic import dotted_name, keyword
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import RemoveKeyword, SetKeyword

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, ...)
_SHUFFLE_POSITION = 2
_SAMPLER_POSITION = 3
ITERABLE_DATASETS = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})


class MissingDistributedSampler(Rule):
    code = "XLA202"
    name = "missing-distributed-sampler"
    summary = "Training `DataLoader` without a `DistributedSampler` in a multi-process XLA script"
    explanation = """
## Why

`xmp.spawn`/`torch_xla.launch` run the script once per device. A `DataLoader` without a
sampler hands every process the whole dataset, so each epoch does the work N times and
the gradient all-reduce averages N copies of the same batches: the convergence failure
the SageMaker Training Compiler troubleshooting guide describes. A
`DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal())` gives
each process its own shard.

## What is flagged

In a multi-process XLA script (spawns or launches itself, defines `_mp_fn`, calls
`dist.init_process_group("xla")` or `xr.world_size()`/`xr.global_ordinal()`; not SPMD,
not an HF Trainer/accelerate loop): a *training* `DataLoader` — one whose batches a
training loop iterates, directly or through `enumerate`/`tqdm`/`MpDeviceLoader`/
`ParallelLoader`, a variable, an attribute or a function parameter — that has no
`sampler=`/`batch_sampler=`. Not flagged: evaluation loaders, a dataset already split
between the processes (`ds.shard(num_shards=xr.world_size(), ...)`,
`split_dataset_by_node`), an `IterableDataset` subclass of the same module.

## Fix

unsafe (the order and the number of batches change):
`sampler=DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal(),
shuffle=<shuffle>)`, and `shuffle=` moves from the loader to the sampler (a loader may
not have both). Only when the dataset is a name or attribute (it is written twice).
Call `sampler.set_epoch(epoch)` at the start of each epoch for a new order each epoch.
For targets before 2.1, `xm.xrt_world_size()`/`xm.get_ordinal()`.

## Example

```python
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
```
becomes
```python
train_loader = DataLoader(train_ds, batch_size=32, sampler=DistributedSampler(train_ds, num_replicas=xr.world_size(), rank=xr.global_ordinal(), shuffle=True))
```
"""
    fix_availability = "unsafe"

    VALID = [
        Valid(
            """
            import torch_xla.runtime as xr
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler
            def _mp_fn(index):
                sampler = DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal())
                loader = DataLoader(ds, batch_size=8, sampler=sampler)
                for x, y in loader:
                    model(x, y).backward()
            """
        ),
        # One process: the loader is right as it is.
        Valid(
            """
            import torch_xla
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, shuffle=True)
            for x, y in loader:
                model(x, y).backward()
            """
        ),
        # An evaluation loader, and a dataset sharded by hand.
        Valid(
            """
            import torch_xla.runtime as xr
            from torch.utils.data import DataLoader
            def _mp_fn(index):
                train_ds = raw.shard(num_shards=xr.world_size(), index=xr.global_ordinal())
                train_loader = DataLoader(train_ds, batch_size=8)
                eval_loader = DataLoader(eval_ds, batch_size=8)
                for x, y in train_loader:
                    model(x, y).backward()
                for x, y in eval_loader:
                    model(x, y)
            """
        ),
        # SPMD: one process per host.
        Valid(
            """
            import torch_xla.runtime as xr
            from torch.utils.data import DataLoader
            xr.use_spmd()
            print(xr.world_size())
            loader = DataLoader(ds, batch_size=8)
            for x in loader:
                model(x).backward()
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla.runtime as xr
            from torch.utils.data import DataLoader
            def _mp_fn(index):
                train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)
                for x, y in train_loader:
                    model(x, y).backward()
            """,
            unsafe_fixed="""
            import torch_xla.runtime as xr
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler

            def _mp_fn(index):
                train_loader = DataLoader(
                    train_ds,
                    batch_size=8,
                    sampler=DistributedSampler(train_ds, num_replicas=xr.world_size(), rank=xr.global_ordinal(), shuffle=True),
                )
                for x, y in train_loader:
                    model(x, y).backward()
            """,
            count=1,
        ),
        # Through a ParallelLoader and a function parameter; no shuffle: shuffle=False.
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.distributed.parallel_loader as pl
            import torch_xla.distributed.xla_multiprocessing as xmp
            def train_loop(loader):
                for x, y in loader:
                    model(x, y).backward()
                    xm.optimizer_step(opt)
            def _mp_fn(index):
                loader = torch.utils.data.DataLoader(self.data, 16)
                para = pl.ParallelLoader(loader, [xm.xla_device()])
                train_loop(para.per_device_loader(xm.xla_device()))
            xmp.spawn(_mp_fn)
            """,
            unsafe_fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.distributed.parallel_loader as pl
            import torch_xla.distributed.xla_multiprocessing as xmp
            import torch_xla.runtime as xr

            def train_loop(loader):
                for x, y in loader:
                    model(x, y).backward()
                    xm.optimizer_step(opt)
            def _mp_fn(index):
                loader = torch.utils.data.DataLoader(
                    self.data,
                    16,
                    sampler=torch.utils.data.distributed.DistributedSampler(
                        self.data,
                        num_replicas=xr.world_size(),
                        rank=xr.global_ordinal(),
                        shuffle=False,
                    ),
                )
                para = pl.ParallelLoader(loader, [xm.xla_device()])
                train_loop(para.per_device_loader(xm.xla_device()))
            xmp.spawn(_mp_fn)
            """,
            count=1,
        ),
        # Old target: the XRT-era names.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            from torch.utils.data import DataLoader
            def _mp_fn(index):
                ds = make_dataset()
                for x in DataLoader(ds, batch_size=4):
                    model(x).backward()
            """,
            unsafe_fixed="""
            import torch_xla.core.xla_model as xm
            from torch.utils.data import DataLoader
            from torch.utils.data.distributed import DistributedSampler

            def _mp_fn(index):
                ds = make_dataset()
                for x in DataLoader(
                    ds,
                    batch_size=4,
                    sampler=DistributedSampler(ds, num_replicas=xm.xrt_world_size(), rank=xm.get_ordinal(), shuffle=False),
                ):
                    model(x).backward()
            """,
            count=1,
            target_version="1.13",
        ),
        # The dataset is a call (it would be built twice): reported, no fix.
        Invalid(
            """
            import torch_xla
            from torch.utils.data import DataLoader
            def _mp_fn(index):
                for x in DataLoader(make_dataset(), batch_size=4):
                    model(x).backward()
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        distributed = self.ctx.distributed
        if not distributed.data_parallel:
            return
        iterable = self._iterable_dataset_classes()
        for loader in distributed.training_loaders:
            call = loader.call
            if (
                keyword(call, "sampler") is not None
                or keyword(call, "batch_sampler") is not None
                or len(call.args) > _SAMPLER_POSITION
                or any(k.arg is None for k in call.keywords)
                or any(isinstance(a, ast.Starred) for a in call.args)
                or distributed.sharded_by_hand(loader.dataset)
                or self._is_iterable(loader.dataset, iterable)
            ):
                continue
            self.report(call, fix=self._fix(call, loader.dataset))

    def _fix(self, call: ast.Call, dataset: ast.expr | None):
        if dataset is None or dotted_name(dataset) is None or len(call.args) > _SHUFFLE_POSITION:
            return None
        shuffle = keyword(call, "shuffle")
        shuffle_code = self.ctx.source_of(shuffle.value) if shuffle is not None else "False"
        if "\n" in shuffle_code:
            return None
        sampler, imports = self._sampler()
        world, rank, world_imports = world_api(self.ctx)
        value = f"{sampler}({self.ctx.source_of(dataset)}, num_replicas={world}, rank={rank}, shuffle={shuffle_code})"
        operations = [SetKeyword(self.ctx.span(call), "sampler", value)]
        if shuffle is not None:
            operations.insert(0, RemoveKeyword(self.ctx.span(call), "shuffle"))
        return self.fix(
            "unsafe",
            "give each process its own shard with a `DistributedSampler`",
            *operations,
            imports=(*imports, *world_imports),
        )

    def _sampler(self):
        imports = self.ctx.semantic.imports
        for name in DISTRIBUTED_SAMPLERS:
            existing = imports.alias_for(name)
            if existing:
                return existing, ()
        # `torch.utils.data.DataLoader` spelled out: spell the sampler out too.
        spelled_out = any(dotted_name(c.func) == "torch.utils.data.DataLoader" for c in self.ctx.semantic.calls)
        if spelled_out and imports.bindings.get("torch") == "torch":
            return DISTRIBUTED_SAMPLER, ()
        return self.ctx.reference_object(DISTRIBUTED_SAMPLER)

    def _iterable_dataset_classes(self) -> set[str]:
        semantic = self.ctx.semantic
        return {
            node.name
            for node in semantic.nodes_of(ast.ClassDef)
            if any(semantic.qualified_name(b) in ITERABLE_DATASETS for b in node.bases)
        }

    def _is_iterable(self, dataset: ast.expr | None, classes: set[str]) -> bool:
        if not classes or dataset is None:
            return False
        if isinstance(dataset, ast.Call):
            return isinstance(dataset.func, ast.Name) and dataset.func.id in classes
        return any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in classes
            for n in self.ctx.semantic.calls
        )
