"""XLA206 gpu-num-devices: XLA:GPU multi-process scripts and ``GPU_NUM_DEVICES``.

Legacy XLA:GPU (``PJRT_DEVICE=CUDA``/``GPU``, removed in torch_xla 2.9) starts one
process per GPU only when ``GPU_NUM_DEVICES`` says how many there are; and an
environment value must be a string (``os.environ[...] = 4`` raises ``TypeError``).
"""

from __future__ import annotations

import ast

from xlalint.analysis.scripts import SPAWN
from xlalint.analysis.semantic import string_value
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import ReplaceExpr

ENVIRON = frozenset({"os.environ"})
SETDEFAULT_OR_PUTENV = frozenset({"os.environ.setdefault", "os.putenv"})
GPU_DEVICES = frozenset({"CUDA", "GPU"})
# Calls that return a number, never a string.
_NUMBER_CALLS = frozenset(
    {
        "len",
        "int",
        "float",
        "round",
        "abs",
        "min",
        "max",
        "sum",
        "torch.cuda.device_count",
        "os.cpu_count",
        "multiprocessing.cpu_count",
        "torch_xla.runtime.world_size",
        "torch_xla.runtime.global_device_count",
        "torch_xla.runtime.local_device_count",
        "torch_xla.runtime.addressable_device_count",
    }
)


class GpuNumDevices(Rule):
    code = "XLA206"
    name = "gpu-num-devices"
    summary = "XLA:GPU multi-process script without a string `GPU_NUM_DEVICES`"
    explanation = """
## Why

On legacy XLA:GPU (`PJRT_DEVICE=CUDA` or `GPU`, deprecated in torch_xla 2.8 and
removed in 2.9), `xmp.spawn`/`torch_xla.launch` start one process per GPU only if
`GPU_NUM_DEVICES` is set; without it the script runs on one GPU. Set it before spawning:
`os.environ["GPU_NUM_DEVICES"] = "<number of GPUs>"`. Environment values
must be strings: `os.environ["GPU_NUM_DEVICES"] = 4` raises `TypeError: str expected,
not int`.

## What is flagged

- a file that sets `PJRT_DEVICE` to `"CUDA"`/`"GPU"` and spawns or launches processes
  (`xmp.spawn`, `torch_xla.launch`) but never sets `GPU_NUM_DEVICES`: reported at the
  spawn/launch call;
- `os.environ["GPU_NUM_DEVICES"] = <number>` (or `os.environ.setdefault`/`os.putenv`
  with a number: an int or float literal, `len(...)`, `torch.cuda.device_count()`,
  arithmetic on those): reported at the assignment.

The whole XLA:GPU runtime is gone in 2.9: XLA402 reports `PJRT_DEVICE=CUDA` there.

## Fix

safe: wrap the number in `str(...)`. No fix for a missing `GPU_NUM_DEVICES` (how many
GPUs to use is the user's choice).

## Example

```python
os.environ["PJRT_DEVICE"] = "CUDA"
os.environ["GPU_NUM_DEVICES"] = torch.cuda.device_count()
```
becomes
```python
os.environ["PJRT_DEVICE"] = "CUDA"
os.environ["GPU_NUM_DEVICES"] = str(torch.cuda.device_count())
```
"""
    fix_availability = "sometimes"
    # The environment a spawning script sets, whatever it imports.
    same_after_port = True

    VALID = [
        Valid(
            """
            import os
            import torch_xla.distributed.xla_multiprocessing as xmp
            os.environ["PJRT_DEVICE"] = "CUDA"
            os.environ["GPU_NUM_DEVICES"] = "4"
            xmp.spawn(_mp_fn)
            """
        ),
        # TPU: no GPU_NUM_DEVICES needed.
        Valid(
            """
            import os
            import torch_xla
            os.environ["PJRT_DEVICE"] = "TPU"
            torch_xla.launch(_mp_fn)
            """
        ),
        # A string already, or a value of unknown type.
        Valid(
            """
            import os
            import torch
            os.environ["GPU_NUM_DEVICES"] = str(torch.cuda.device_count())
            os.environ.setdefault("GPU_NUM_DEVICES", args.gpus)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import os
            import torch
            import torch_xla.distributed.xla_multiprocessing as xmp
            os.environ["PJRT_DEVICE"] = "CUDA"
            os.environ["GPU_NUM_DEVICES"] = torch.cuda.device_count()
            xmp.spawn(_mp_fn)
            """,
            fixed="""
            import os
            import torch
            import torch_xla.distributed.xla_multiprocessing as xmp
            os.environ["PJRT_DEVICE"] = "CUDA"
            os.environ["GPU_NUM_DEVICES"] = str(torch.cuda.device_count())
            xmp.spawn(_mp_fn)
            """,
            count=1,
        ),
        Invalid(
            """
            import os
            import torch
            os.environ.setdefault("GPU_NUM_DEVICES", 2 * torch.cuda.device_count())
            """,
            fixed="""
            import os
            import torch
            os.environ.setdefault("GPU_NUM_DEVICES", str(2 * torch.cuda.device_count()))
            """,
            count=1,
        ),
        # No GPU_NUM_DEVICES at all: reported at the launch, no fix.
        Invalid(
            """
            from os import environ
            import torch_xla
            environ["PJRT_DEVICE"] = "GPU"
            torch_xla.launch(_mp_fn)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if "GPU_NUM_DEVICES" not in self.ctx.source and "PJRT_DEVICE" not in self.ctx.source:
            return  # nothing to check
        semantic = self.ctx.semantic
        gpu = False
        sets_devices = False
        for node in semantic.nodes_of(ast.Assign):
            for target in node.targets:
                key = self._environ_key(target)
                if key == "PJRT_DEVICE" and string_value(node.value) in GPU_DEVICES:
                    gpu = True
                elif key == "GPU_NUM_DEVICES":
                    sets_devices = True
                    self._check_value(node, node.value)
        for call in self.ctx.semantic.calls_of("setdefault", "putenv", "update"):
            name = semantic.call_name(call)
            if name in SETDEFAULT_OR_PUTENV and len(call.args) == 2:
                key = string_value(call.args[0])
                if key == "PJRT_DEVICE" and string_value(call.args[1]) in GPU_DEVICES:
                    gpu = True
                elif key == "GPU_NUM_DEVICES":
                    sets_devices = True
                    self._check_value(call, call.args[1])
            elif name == "os.environ.update" and any(k.arg == "GPU_NUM_DEVICES" for k in call.keywords):
                sets_devices = True
            elif name == "os.environ.update" and call.args and isinstance(call.args[0], ast.Dict):
                keys = {string_value(k) for k in call.args[0].keys}
                sets_devices = sets_devices or "GPU_NUM_DEVICES" in keys
        # An env dict for a subprocess, a config file... any other mention counts as set.
        sets_devices = (
            sets_devices
            or not gpu
            or any(
                string_value(node) == "GPU_NUM_DEVICES" and not self._is_read(node)
                for node in semantic.nodes_of(ast.Constant)
            )
        )
        if gpu and not sets_devices:
            for call in self.ctx.semantic.calls_of("spawn", "launch"):
                if semantic.call_name(call) in SPAWN:
                    self.report(
                        call,
                        "XLA:GPU starts one process per GPU only when `GPU_NUM_DEVICES` is set before spawning",
                    )

    def _environ_key(self, target: ast.expr) -> str | None:
        if isinstance(target, ast.Subscript) and self.ctx.semantic.qualified_name(target.value) in ENVIRON:
            return string_value(target.slice)
        return None

    def _is_read(self, node: ast.AST) -> bool:
        owner = getattr(node, "parent", None)
        if isinstance(owner, ast.Subscript):
            return isinstance(owner.ctx, ast.Load)
        if isinstance(owner, ast.Call):
            name = self.ctx.semantic.call_name(owner) or ""
            return name in ("os.getenv", "os.environ.get", "os.environ.pop") or name.endswith(".get")
        return False

    def _check_value(self, where: ast.AST, value: ast.expr) -> None:
        if not self._is_number(value):
            return
        fix = self.fix(
            "safe",
            "convert the value with `str(...)`",
            ReplaceExpr(self.ctx.span(value), "str({value})", (("value", self.ctx.span(value)),)),
        )
        self.report(
            where,
            "`GPU_NUM_DEVICES` is set to a number: environment values must be strings (TypeError)",
            fix=fix,
        )

    def _is_number(self, value: ast.expr) -> bool:
        if isinstance(value, ast.Constant):
            return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
        if isinstance(value, ast.UnaryOp):
            return self._is_number(value.operand)
        if isinstance(value, ast.BinOp):
            # Both sides numbers: a number (`"4" * 2` or `"%d" % n` are strings).
            return self._is_number(value.left) and self._is_number(value.right)
        if isinstance(value, ast.Call):
            name = self.ctx.semantic.call_name(value)
            if name is None and isinstance(value.func, ast.Name):
                name = value.func.id
            return name in _NUMBER_CALLS
        return False
