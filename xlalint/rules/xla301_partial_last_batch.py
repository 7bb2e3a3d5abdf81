"""XLA301 partial-last-batch: a training ``DataLoader`` that keeps the last, smaller
batch.

XLA compiles one graph per input shape. When the dataset size is not a multiple of the
batch size, the last batch of every epoch has a new shape: one more compile of the
whole training step (and of the backward), for a handful of samples.
"""

from __future__ import annotations

import ast

from xlalint.analysis.distributed import DISTRIBUTED_SAMPLERS
from xlalint.analysis.kwargs import unpacked_keywords
from xlalint.analysis.scripts import targets_xla, uses_syncing_library
from xlalint.analysis.semantic import keyword
from xlalint.analysis.values import assigned_values, enclosing_scopes
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import SetKeyword

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
#            collate_fn, pin_memory, drop_last, ...)
_BATCH_SIZE_POSITION = 1
_BATCH_SAMPLER_POSITION = 4
RANDOM_SAMPLERS = frozenset({"torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"})
_SAMPLER_DROPS = (
    "Training `DataLoader` without `drop_last=True`: its sampler's `drop_last=True` evens out the processes, "
    "but the loader's last batch is still partial and compiles a new graph"
)


class PartialLastBatch(Rule):
    code = "XLA301"
    name = "partial-last-batch"
    summary = "Training `DataLoader` without `drop_last=True`: the last, smaller batch compiles a new graph"
    explanation = """
## Why

Every new input shape is a new XLA graph, compiled again (seconds for a small model,
minutes for a large one). A `DataLoader` keeps the last, partial batch by default, so
unless the dataset size happens to be a multiple of the batch size, every epoch ends
with a batch of a new shape and a recompile of the forward and backward step.

## What is flagged

In a file that imports torch_xla (or a local module an XLA script imports: checked
with it, `xlalint check train.py` or a walk of the project), a *training* `DataLoader`
(one whose batches a training loop iterates: see XLA202; also one a helper of the file
returns, kept by a class as `self.train_data` and iterated by its method; one a helper
in another local module returns when the script's step loop iterates what it returns,
`loader = prepare_dataloader(32)` with `from data import prepare_dataloader`: reported
and fixed in `data.py`, where the loader is built; either arm of
`pl.MpDeviceLoader(loader, device) if on_xla else loader`; a name rebound to an evaluation loader after the training loop
holds that loader from there on) with no `drop_last=` or `drop_last=False`, also
when its `DistributedSampler` has `drop_last=True` (that evens out the processes; the
loader's last batch is still partial). A `**kwargs` dict the file builds (a literal,
`dict(...)`, a conditional between them, its `.update(...)` and `kwargs["key"] = v`) is
read on every branch: flagged when no branch sets `drop_last` or `batch_sampler`. Not
flagged: a `batch_sampler=` (it decides the batches), `batch_size=None`, a
`drop_last=` given by a variable, a `**kwargs` the file does not build, evaluation
loaders, a `sampler=RandomSampler(ds, num_samples=N)` whose N the batch size divides
(both literals: no batch is partial). A script that uses `accelerate.Accelerator` or
the HF `Trainer` is an XLA script here when it is meant for TPU (it imports torch_xla or
names XLA/TPU): accelerate keeps the partial batch too.

## Fix

unsafe (the last few samples of each epoch are skipped): `drop_last=True`.

## Example

```python
loader = DataLoader(train_ds, batch_size=32, shuffle=True)
```
becomes
```python
loader = DataLoader(train_ds, batch_size=32, shuffle=True, drop_last=True)
```
"""
    fix_availability = "unsafe"

    VALID = [
        Valid(
            """
            import torch_xla
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, drop_last=True)
            for x, y in loader:
                model(x, y).backward()
            """
        ),
        # Not an XLA script; an evaluation loader; a batch sampler; a flag.
        Valid(
            """
            import torch
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8)
            for x, y in loader:
                model(x, y).backward()
            """
        ),
        Valid(
            """
            import torch_xla
            from torch.utils.data import DataLoader
            train = DataLoader(ds, batch_sampler=sampler)
            test = DataLoader(ds, batch_size=8)
            flagged = DataLoader(ds2, batch_size=8, drop_last=args.drop_last)
            for x, y in train:
                model(x, y).backward()
            for x, y in flagged:
                model(x, y).backward()
            for x, y in test:
                model(x, y)
            """
        ),
        # `**kwargs`: one branch sets drop_last; a dict the file does not build.
        Valid(
            """
            import torch_xla
            from torch.utils.data import DataLoader
            kwargs = {"num_workers": 1, "drop_last": True} if use_cuda else {}
            opts = load_options()
            for x, y in DataLoader(ds, batch_size=8, **kwargs):
                model(x, y).backward()
            for x, y in DataLoader(ds, batch_size=8, **opts):
                model(x, y).backward()
            """
        ),
        Valid(
            """
            import torch_xla
            from torch.utils.data import DataLoader
            train_kwargs = {"batch_size": 64}
            if use_cuda:
                train_kwargs.update({"drop_last": True})
            for x, y in DataLoader(ds, **train_kwargs):
                model(x, y).backward()
            """
        ),
        # accelerate with no word of XLA or TPU (it runs on GPUs); a sampler that draws
        # a multiple of the batch size.
        Valid(
            """
            from accelerate import Accelerator
            from torch.utils.data import DataLoader
            accelerator = Accelerator()
            loader = accelerator.prepare(DataLoader(ds, batch_size=8))
            for x, y in loader:
                accelerator.backward(model(x, y))
            """
        ),
        Valid(
            """
            import torch_xla
            from torch.utils.data import DataLoader, RandomSampler
            loader = DataLoader(ds, batch_size=8, sampler=RandomSampler(ds, num_samples=800))
            for x, y in loader:
                model(x, y).backward()
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla
            import torch_xla.distributed.parallel_loader as pl
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, shuffle=True)
            for x, y in pl.MpDeviceLoader(loader, torch_xla.device()):
                model(x, y).backward()
            """,
            unsafe_fixed="""
            import torch_xla
            import torch_xla.distributed.parallel_loader as pl
            from torch.utils.data import DataLoader
            loader = DataLoader(ds, batch_size=8, shuffle=True, drop_last=True)
            for x, y in pl.MpDeviceLoader(loader, torch_xla.device()):
                model(x, y).backward()
            """,
            count=1,
        ),
        # drop_last=False is replaced; the loop is in another module: a name saying
        # "train" makes the loader a training loader.
        Invalid(
            """
            import torch
            import torch_xla
            train_dataloader = torch.utils.data.DataLoader(ds, batch_size=8, drop_last=False)
            """,
            unsafe_fixed="""
            import torch
            import torch_xla
            train_dataloader = torch.utils.data.DataLoader(ds, batch_size=8, drop_last=True)
            """,
            count=1,
        ),
        # pytorch/examples' MNIST: no branch of the options sets drop_last.
        Invalid(
            """
            import torch_xla
            from torch.utils.data import DataLoader
            kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
            train_loader = DataLoader(ds, batch_size=8, shuffle=True, **kwargs)
            for x, y in train_loader:
                model(x, y).backward()
            """,
            unsafe_fixed="""
            import torch_xla
            from torch.utils.data import DataLoader
            kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
            train_loader = DataLoader(ds, batch_size=8, shuffle=True, drop_last=True, **kwargs)
            for x, y in train_loader:
                model(x, y).backward()
            """,
            count=1,
        ),
        # The DDP tutorial: a helper returns the loader, a Trainer keeps it and iterates it.
        Invalid(
            """
            import torch_xla
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, model, train_data):
                    self.model = model
                    self.train_data = train_data

                def fit(self):
                    for x, y in self.train_data:
                        self.model(x, y).backward()

            def prepare_dataloader(ds, bs):
                return DataLoader(ds, batch_size=bs, shuffle=False)

            Trainer(model, prepare_dataloader(ds, 8)).fit()
            """,
            unsafe_fixed="""
            import torch_xla
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, model, train_data):
                    self.model = model
                    self.train_data = train_data

                def fit(self):
                    for x, y in self.train_data:
                        self.model(x, y).backward()

            def prepare_dataloader(ds, bs):
                return DataLoader(ds, batch_size=bs, shuffle=False, drop_last=True)

            Trainer(model, prepare_dataloader(ds, 8)).fit()
            """,
            count=1,
        ),
        # The sampler drops its remainder; the loader still yields a partial last batch.
        Invalid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal(), drop_last=True)
            for x, y in DataLoader(ds, batch_size=8, sampler=sampler):
                model(x, y).backward()
            """,
            unsafe_fixed="""
            import torch_xla
            import torch_xla.runtime as xr
            from torch.utils.data import DataLoader, DistributedSampler
            sampler = DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal(), drop_last=True)
            for x, y in DataLoader(ds, batch_size=8, sampler=sampler, drop_last=True):
                model(x, y).backward()
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        distributed = self.ctx.distributed
        semantic = self.ctx.semantic
        # accelerate and the HF Trainer keep the partial batch too: meant for TPU, they are XLA scripts here.
        if not (self.ctx.in_xla_program or (uses_syncing_library(semantic) and targets_xla(semantic))):
            return
        for loader in distributed.training_loaders:
            call = loader.call
            # What `**kwargs` may pass, on any branch (None: a dict the file does not build).
            unpacked = unpacked_keywords(call)
            if (
                unpacked is None
                or keyword(call, "batch_sampler") is not None
                or len(call.args) > _BATCH_SAMPLER_POSITION
                or any(isinstance(a, ast.Starred) for a in call.args)
                or _is_none(keyword(call, "batch_size"))
                or (len(call.args) > _BATCH_SIZE_POSITION and _is_none_value(call.args[_BATCH_SIZE_POSITION]))
                or {"batch_sampler", "drop_last"} & set(unpacked)
                or not all(isinstance(v, ast.expr) and not _is_none_value(v) for v in unpacked.get("batch_size", []))
            ):
                continue
            if self._samples_whole_batches(call):
                continue
            drop_last = keyword(call, "drop_last")
            if drop_last is not None and not (
                isinstance(drop_last.value, ast.Constant) and drop_last.value.value is False
            ):
                continue
            fix = self.fix(
                "unsafe", "drop the last, partial batch", SetKeyword(self.ctx.span(call), "drop_last", "True")
            )
            message = _SAMPLER_DROPS if self._sampler_drops_last(call) else None
            self.report(call if drop_last is None else drop_last, message, fix=fix)

    def _samples_whole_batches(self, call: ast.Call) -> bool:
        """``sampler=RandomSampler(ds, num_samples=800)`` with ``batch_size=8``: both
        literals, the batch size divides the number of samples, so no batch is partial."""
        batch_size = keyword(call, "batch_size")
        size = batch_size.value if batch_size is not None else None
        if size is None and len(call.args) > _BATCH_SIZE_POSITION:
            size = call.args[_BATCH_SIZE_POSITION]
        for sampler in self._sampler_values(call):
            if not (isinstance(sampler, ast.Call) and self.ctx.semantic.call_name(sampler) in RANDOM_SAMPLERS):
                continue
            samples = keyword(sampler, "num_samples")
            if samples is not None and _divides(size, samples.value):
                return True
        return False

    def _sampler_values(self, call: ast.Call) -> list[ast.expr]:
        """What the loader's ``sampler=`` is: given there, or bound to the name passed."""
        sampler = keyword(call, "sampler")
        values = [sampler.value] if sampler is not None else []
        if values and isinstance(values[0], ast.Name):
            name = values[0].id
            values = [
                v
                for scope in enclosing_scopes(values[0])
                for v in assigned_values(scope, lambda t, n=name: isinstance(t, ast.Name) and t.id == n, shallow=True)
            ]
        return values

    def _sampler_drops_last(self, call: ast.Call) -> bool:
        """The loader's ``sampler=`` is a ``DistributedSampler(..., drop_last=True)``
        (given there or bound to the name passed)."""
        for value in self._sampler_values(call):
            if isinstance(value, ast.Call) and self.ctx.semantic.call_name(value) in DISTRIBUTED_SAMPLERS:
                drops = keyword(value, "drop_last")
                if drops is not None and isinstance(drops.value, ast.Constant) and drops.value.value is True:
                    return True
        return False


def _divides(size: ast.expr | None, samples: ast.expr) -> bool:
    literal = [isinstance(n, ast.Constant) and type(n.value) is int and n.value > 0 for n in (size, samples)]
    return all(literal) and samples.value % size.value == 0  # type: ignore[union-attr]


def _is_none(kw: ast.keyword | None) -> bool:
    return kw is not None and _is_none_value(kw.value)


def _is_none_value(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
