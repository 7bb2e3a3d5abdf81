"""XLA205 spawn-nprocs: ``xmp.spawn(..., nprocs=N)`` with N other than 1 or None.

Under PJRT (the only runtime since torch_xla 2.0) ``xmp.spawn`` starts one process per
local device by itself; any ``nprocs`` but ``1`` (run in this process) or ``None``
raises ``ValueError: Unsupported nprocs``.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import keyword
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import RemoveKeyword, ReplaceExpr

SPAWN = frozenset({"torch_xla.distributed.xla_multiprocessing.spawn"})
# spawn(fn, args=(), nprocs=None, join=True, daemon=False, start_method="spawn")
_NPROCS_POSITION = 2
# XRT (torch_xla 1.x) took nprocs=8; PJRT, the runtime from 2.0 on, does not.
PJRT_DEFAULT = (2, 0)


class SpawnNprocs(Rule):
    code = "XLA205"
    name = "spawn-nprocs"
    summary = "`xmp.spawn(nprocs=...)` with a value other than 1 or None raises under PJRT"
    explanation = """
## Why

With PJRT, `xmp.spawn` uses every local device (limit them with `TPU_NUM_DEVICES`,
`CPU_NUM_DEVICES`, ... or `TPU_PROCESS_BOUNDS`). It accepts `nprocs=None` (the default:
all devices) or `nprocs=1` (run `fn` in this process, for debugging); anything else
raises `ValueError: Unsupported nprocs (8)`. Old XRT scripts pass `nprocs=8` or
`nprocs=args.num_cores`.

## What is flagged

`xmp.spawn(...)` given `nprocs` (keyword or third positional argument) that is not the
literal `1` or `None` — a variable too, since any value but 1/None raises. Not flagged
for `target-version` below 2.0 (XRT).

## Fix

safe for a literal (`nprocs=8`): drop it. unsafe for any other expression: drop it
(when the value was 1 at run time, the script meant one process and now gets one per
device).

## Example

```python
xmp.spawn(_mp_fn, args=(flags,), nprocs=8, start_method="fork")
```
becomes
```python
xmp.spawn(_mp_fn, args=(flags,), start_method="fork")
```
"""
    fix_availability = "sometimes"

    VALID = [
        Valid(
            """
            import torch_xla.distributed.xla_multiprocessing as xmp
            xmp.spawn(_mp_fn, args=(flags,))
            xmp.spawn(_mp_fn, args=(flags,), nprocs=1)
            xmp.spawn(_mp_fn, (flags,), None)
            """
        ),
        # torch.multiprocessing.spawn does take nprocs.
        Valid(
            """
            import torch.multiprocessing as mp
            mp.spawn(train, args=(world,), nprocs=8)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla.distributed.xla_multiprocessing as xmp
            xmp.spawn(_mp_fn, args=(flags,), nprocs=8, start_method="fork")
            """,
            fixed="""
            import torch_xla.distributed.xla_multiprocessing as xmp
            xmp.spawn(_mp_fn, args=(flags,), start_method="fork")
            """,
            count=1,
        ),
        # A variable: only an unsafe fix.
        Invalid(
            """
            from torch_xla.distributed import xla_multiprocessing
            xla_multiprocessing.spawn(_mp_fn, args=(flags,), nprocs=flags.num_cores)
            """,
            unsafe_fixed="""
            from torch_xla.distributed import xla_multiprocessing
            xla_multiprocessing.spawn(_mp_fn, args=(flags,))
            """,
            count=1,
        ),
        # Positional: replaced by its default, None.
        Invalid(
            """
            import torch_xla.distributed.xla_multiprocessing as xmp
            xmp.spawn(_mp_fn, (flags,), 8, True)
            """,
            fixed="""
            import torch_xla.distributed.xla_multiprocessing as xmp
            xmp.spawn(_mp_fn, (flags,), None, True)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if self.ctx.target_version < PJRT_DEFAULT:
            return
        for call in self.ctx.semantic.calls_of("spawn"):
            if self.ctx.semantic.call_name(call) in SPAWN:
                self._check(call)

    def _check(self, node: ast.Call) -> None:
        if any(isinstance(a, ast.Starred) for a in node.args[: _NPROCS_POSITION + 1]):
            return
        kw = keyword(node, "nprocs")
        value = kw.value if kw is not None else None
        if value is None and len(node.args) > _NPROCS_POSITION:
            value = node.args[_NPROCS_POSITION]
        if value is None or _one_or_none(value):
            return
        literal = isinstance(value, ast.Constant) or (
            isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant)
        )
        if kw is not None:
            operation = RemoveKeyword(self.ctx.span(node), "nprocs")
        else:
            operation = ReplaceExpr(self.ctx.span(value), "None")
        given = " ".join(self.ctx.source_of(value).split())
        given = given if len(given) <= 30 else given[:27] + "..."
        message = f"`nprocs={given}` raises under PJRT (only 1 or None): spawn uses every local device"
        fix = self.fix("safe" if literal else "unsafe", "drop `nprocs`: spawn uses every local device", operation)
        self.report(value if kw is None else kw, message, fix=fix)


def _one_or_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and (node.value is None or node.value == 1)
