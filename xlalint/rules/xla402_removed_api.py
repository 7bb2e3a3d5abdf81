"""XLA402 removed-api: a torch_xla API that the target version no longer has.

The names, the release that removed each and its replacement are the table in
``xlalint/rules/_api_versions.py``; this module only says how they are reported.
"""

from __future__ import annotations

from xlalint.engine.rule import Invalid, Valid
from xlalint.rules._api_versions import ApiVersionRule


class RemovedApi(ApiVersionRule):
    code = "XLA402"
    name = "removed-api"
    summary = "a torch_xla API the target version no longer has"
    status = "removed"
    fix_availability = "sometimes"
    explanation = """
## Why
Scripts written for older torch_xla releases call functions that later releases
removed: the script fails with `AttributeError`/`ImportError` on the first call.

## What is flagged
For the configured `target-version` (default 2.9), each import of a removed name or
module and each call of (or reference to) a removed name, however it was imported:
- `xm.xrt_world_size()`, `xm.get_ordinal()`, `xm.parse_xla_device()` (removed in 2.7);
- `torch_xla.amp.GradScaler`, the module `torch_xla.amp.grad_scaler`, and
  `PJRT_DEVICE` set to `CUDA`/`GPU` (`os.environ[...] = ...`, `setdefault`, `update`,
  `putenv`, an `env` dict): XLA:CUDA was removed in 2.9. There is no XLA GradScaler:
  autocast to bfloat16 (`torch.autocast("xla", dtype=torch.bfloat16)`), which needs no
  loss scaling. torch_xla no longer has a built-in XLA:CUDA: `PJRT_DEVICE=CUDA` works
  only with a PJRT CUDA plugin installed (e.g. `xla-cuda12-pjrt`); otherwise run on TPU
  or CPU;
- `torch_xla.experimental.pjrt` (now `torch_xla.runtime`), and the pre-1.0
  `torch_xla_py` modules (now `torch_xla.core.xla_model`, ...; for
  `torch_xla_py.data_parallel`, `torch_xla.distributed.data_parallel` or, better,
  `torch_xla.distributed.parallel_loader.MpDeviceLoader`).

`torch_xla.distributed.data_parallel` still exists in 2.9 and is not flagged. The
list, with versions, is one data table (`xlalint/rules/_api_versions.py`).

## Fix (safe)
`xm.xrt_world_size()` -> `xr.world_size()`, `xm.get_ordinal()` ->
`xr.global_ordinal()` (adding `import torch_xla.runtime as xr`; not when a `defval`
is passed). Other removed names have no drop-in replacement: the message says what
to use.

## Example
```python
import torch_xla.core.xla_model as xm
sampler = DistributedSampler(ds, num_replicas=xm.xrt_world_size(), rank=xm.get_ordinal())
# becomes
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
sampler = DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal())
```
"""

    VALID = [
        Valid(
            """
            import torch_xla.runtime as xr
            import torch_xla.distributed.data_parallel as dp
            sampler = DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal())
            os.environ["PJRT_DEVICE"] = "TPU"
            """
        ),
        # A fallback class that only shares the name; strings are not code.
        Valid(
            """
            import torch
            class xm:
                @staticmethod
                def xrt_world_size():
                    return 1
            n = xm.xrt_world_size()
            print("xm.get_ordinal() was removed")
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            sampler = DistributedSampler(ds, num_replicas=xm.xrt_world_size(), rank=xm.get_ordinal())
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr

            sampler = DistributedSampler(ds, num_replicas=xr.world_size(), rank=xr.global_ordinal())
            """,
            count=2,
        ),
        # Imported by name: reported at the import and at the call; the import goes with the fix.
        Invalid(
            """
            import torch_xla.runtime as runtime
            from torch_xla.core.xla_model import get_ordinal, xrt_world_size
            rank, world = get_ordinal(), xrt_world_size(defval=1)
            """,
            fixed="""
            import torch_xla.runtime as runtime
            from torch_xla.core.xla_model import xrt_world_size
            rank, world = runtime.global_ordinal(), xrt_world_size(defval=1)
            """,
            count=4,
        ),
        Invalid(
            """
            import os
            from torch_xla.amp import GradScaler
            import torch_xla.core.xla_model as xm
            os.environ["PJRT_DEVICE"] = "CUDA"
            os.environ.setdefault("PJRT_DEVICE", "GPU")
            scaler = GradScaler()
            dev = xm.parse_xla_device("xla:0")
            """,
            count=5,
        ),
        Invalid(
            """
            import torch_xla_py.xla_model as xm
            from torch_xla_py import data_parallel as dp
            import torch_xla.experimental.pjrt as pjrt
            """,
            count=3,
        ),
        # A stand-in for machines without torch_xla, and a guarded import: reported, not
        # fixed (the new name, or an unconditional import of it, would break those paths).
        Invalid(
            """
            import torch
            try:
                import torch_xla.core.xla_model as xm
            except ImportError:
                class _Stub:
                    def xrt_world_size(self):
                        return 1
                xm = _Stub()
            if is_torch_xla_available():
                from torch_xla.core import xla_model
            world = xm.xrt_world_size()
            rank = xla_model.get_ordinal()
            """,
            count=2,
        ),
        # Target 2.6: get_ordinal still exists (XLA401); XLA:CUDA too.
        Invalid(
            """
            import os
            import torch
            import torch_xla_py.xla_model as xm
            os.environ["PJRT_DEVICE"] = "CUDA"
            """,
            count=1,
            target_version="2.6",
        ),
    ]
