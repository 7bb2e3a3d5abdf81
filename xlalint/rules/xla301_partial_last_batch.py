"""XLA301 partial-last-batch: a training ``DataLoader`` that keeps the last, smaller
batch.

XLA compiles one graph per input shape. When the dataset size is not a multiple of the
batch size, the last batch of every epoch has a new shape: one more compile of the
whole training step (and of the backward), for a handful of samples.
"""

from __future__ import annotations

import ast

from xlalint.linter.model import SetKeyword
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.semantic import keyword

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
#            collate_fn, pin_memory, drop_last, ...)
_BATCH_SIZE_POSITION = 1
_BATCH_SAMPLER_POSITION = 4


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

In a file that imports torch_xla, a *training* `DataLoader` (one whose batches a
training loop iterates: see XLA202) with no `drop_last=` or `drop_last=False`. Not
flagged: a `batch_sampler=` (it decides the batches), `batch_size=None`, a
`drop_last=` given by a variable, evaluation loaders.

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
    ]

    def finish(self) -> None:
        distributed = self.ctx.distributed
        if not distributed.uses_xla:
            return
        for loader in distributed.training_loaders:
            call = loader.call
            if (
                keyword(call, "batch_sampler") is not None
                or len(call.args) > _BATCH_SAMPLER_POSITION
                or any(k.arg is None for k in call.keywords)
                or any(isinstance(a, ast.Starred) for a in call.args)
                or _is_none(keyword(call, "batch_size"))
                or (len(call.args) > _BATCH_SIZE_POSITION and _is_none_value(call.args[_BATCH_SIZE_POSITION]))
            ):
                continue
            drop_last = keyword(call, "drop_last")
            if drop_last is not None and not (
                isinstance(drop_last.value, ast.Constant) and drop_last.value.value is False
            ):
                continue
            fix = self.fix(
                "unsafe", "drop the last, partial batch", SetKeyword(self.ctx.span(call), "drop_last", "True")
            )
            self.report(call if drop_last is None else drop_last, fix=fix)


def _is_none(kw: ast.keyword | None) -> bool:
    return kw is not None and _is_none_value(kw.value)


def _is_none_value(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
