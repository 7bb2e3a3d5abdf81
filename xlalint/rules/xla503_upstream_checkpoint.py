"""XLA503 upstream-checkpoint: ``torch.utils.checkpoint`` in an XLA script saves no memory.

Activation checkpointing recomputes the forward in the backward instead of keeping its
activations. Traced into one XLA graph, the recomputation is the same expression as the
forward, and XLA's common-subexpression elimination merges the two: the activations are
kept after all. ``torch_xla.utils.checkpoint.checkpoint`` puts an optimization barrier
around the recomputed inputs so that it stays a recomputation.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import keyword
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import Import, RemoveKeyword, ReplaceExpr

UPSTREAM_CHECKPOINT = frozenset({"torch.utils.checkpoint.checkpoint"})
UPSTREAM_SEQUENTIAL = frozenset({"torch.utils.checkpoint.checkpoint_sequential"})
XLA_CHECKPOINT_MODULE = "torch_xla.utils.checkpoint"
# The keywords torch_xla 2.9's `checkpoint(function, *args, use_reentrant=True, **kwargs)`
# accepts: it raises on any other, and on `use_reentrant=False`.
_XLA_KEYWORDS = frozenset({"use_reentrant", "preserve_rng_state"})


class UpstreamCheckpoint(Rule):
    code = "XLA503"
    name = "upstream-checkpoint"
    summary = "`torch.utils.checkpoint` in an XLA script saves no memory: use `torch_xla.utils.checkpoint`"
    fix_availability = "sometimes"
    explanation = """
## Why

`torch.utils.checkpoint.checkpoint(fn, x)` drops `fn`'s activations after the forward
and runs `fn` again in the backward. On XLA the forward and the backward are traced into
one graph, where the recomputation is the very same expression as the forward: XLA's
common-subexpression elimination merges them and keeps the activations, so the
checkpoint saves no memory (and the script runs as if it had none). torch_xla ships its
own `torch_xla.utils.checkpoint.checkpoint`, which wraps the recomputation's inputs in an
optimization barrier so that the compiler cannot merge it back (torch_xla 2.9 source,
`torch_xla/utils/checkpoint.py`; a recurring pytorch/xla issue).

## What is flagged

`torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` (however they
are imported) in a file that imports torch_xla.

## Fix

safe: `torch.utils.checkpoint.checkpoint(fn, *args)` ->
`torch_xla.utils.checkpoint.checkpoint(fn, *args)` (the same signature in 2.9), when the
call passes no keyword but `preserve_rng_state=` or `use_reentrant=True`. unsafe with
`use_reentrant=False`, which torch_xla's checkpoint rejects (it recomputes in the
reentrant way only): the keyword is dropped. No fix for other keywords (`context_fn=`,
`determinism_check=`, `**kwargs`), which it does not take, nor for `checkpoint_sequential`,
which torch_xla does not have (checkpoint each segment instead).

## Example

```python
from torch.utils.checkpoint import checkpoint
h = checkpoint(block, h)
```
becomes
```python
import torch_xla.utils.checkpoint
h = torch_xla.utils.checkpoint.checkpoint(block, h)
```
"""

    VALID = [
        Valid(
            """
            import torch_xla
            import torch_xla.utils.checkpoint
            h = torch_xla.utils.checkpoint.checkpoint(block, h)
            """
        ),
        # No torch_xla in the file: a GPU script.
        Valid(
            """
            import torch.utils.checkpoint
            h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla
            from torch.utils.checkpoint import checkpoint
            def forward(blocks, h):
                for block in blocks:
                    h = checkpoint(block, h)
                return h
            """,
            fixed="""
            import torch_xla
            import torch_xla.utils.checkpoint

            def forward(blocks, h):
                for block in blocks:
                    h = torch_xla.utils.checkpoint.checkpoint(block, h)
                return h
            """,
            count=1,
        ),
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            out = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
            """,
            fixed=None,
            unsafe_fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.utils.checkpoint

            out = torch_xla.utils.checkpoint.checkpoint(layer, x)
            """,
            count=1,
        ),
        # No fix: a keyword torch_xla's checkpoint does not take; no XLA `checkpoint_sequential`.
        Invalid(
            """
            import torch_xla
            import torch.utils.checkpoint as cp
            a = cp.checkpoint(layer, x, context_fn=make_context)
            b = cp.checkpoint_sequential(layers, 2, x)
            """,
            count=2,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.distributed.uses_xla:
            return
        semantic = self.ctx.semantic
        for call in self.ctx.semantic.calls_of("checkpoint", "checkpoint_sequential"):
            name = semantic.call_name(call)
            if name in UPSTREAM_CHECKPOINT:
                fix = self._fix(call)
                message = self.summary if fix else f"{self.summary} (no fix: other keywords)"
                self.report(call, message, fix=fix)
            elif name in UPSTREAM_SEQUENTIAL:
                self.report(
                    call,
                    "`torch.utils.checkpoint.checkpoint_sequential` in an XLA script saves no memory",
                )

    def _fix(self, call: ast.Call):
        if any(k.arg not in _XLA_KEYWORDS for k in call.keywords):
            return None  # `context_fn=`, `**kwargs`: torch_xla's checkpoint raises on them
        reentrant = keyword(call, "use_reentrant")
        operations: list = []
        applicability = "safe"
        if reentrant is not None:
            value = reentrant.value
            if isinstance(value, ast.Constant) and value.value is True:
                pass
            elif isinstance(value, ast.Constant) and value.value is False:
                applicability = "unsafe"
                operations.append(RemoveKeyword(self.ctx.span(call), "use_reentrant"))
            else:
                return None
        module, imports = self.ctx.reference(XLA_CHECKPOINT_MODULE, at=call)
        if not imports and XLA_CHECKPOINT_MODULE not in self.ctx.semantic.imports.imported_modules:
            # `import torch_xla` does not import its `utils.checkpoint` submodule.
            imports = (Import(XLA_CHECKPOINT_MODULE),)
        binding = self.ctx.semantic.imports.import_binding(call.func)
        operations.insert(0, ReplaceExpr(self.ctx.span(call.func), f"{module}.checkpoint"))
        message = "use `torch_xla.utils.checkpoint.checkpoint`, which XLA does not merge back"
        if applicability == "unsafe":
            message += " (reentrant: its only mode)"
        return self.fix(
            applicability,
            message,
            *operations,
            imports=imports,
            unused_imports=(binding,) if binding is not None else (),
        )
