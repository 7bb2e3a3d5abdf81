"""XLA401 deprecated-api: a torch_xla API deprecated at the target version.

The names, the release that deprecated each and its replacement are the table in
``xlalint/rules/_api_versions.py``; this module only says how they are reported.
"""

from __future__ import annotations

from xlalint.engine.rule import Invalid, Valid
from xlalint.rules._api_versions import ApiVersionRule


class DeprecatedApi(ApiVersionRule):
    code = "XLA401"
    name = "deprecated-api"
    summary = "a torch_xla API deprecated at the target version"
    status = "deprecated"
    fix_availability = "sometimes"
    explanation = """
## Why
A deprecated torch_xla function still works but warns on every call, and goes away
in a later release: scripts written for torch_xla 1.x-2.6 keep calling
`xm.xla_device()` and `xm.mark_step()`, deprecated in 2.8 in favour of
`torch_xla.device()` and `torch_xla.sync()`.

## What is flagged
For the configured `target-version` (default 2.9), each call of, or reference to, a
name deprecated at or before that version and not yet removed (removed names are
XLA402), however it was imported (`import torch_xla.core.xla_model as xm`,
`from torch_xla.core.xla_model import mark_step`), and each import of a deprecated
module. With target 2.8 and later: `xm.xla_device()` (use `torch_xla.device()`),
`xm.mark_step()` (use `torch_xla.sync()`); with targets 2.5-2.6 also
`xm.xrt_world_size()` and `xm.get_ordinal()`. The list, with versions, is one data
table (`xlalint/rules/_api_versions.py`).

## Fix (safe)
Rename to the replacement when it takes the arguments given:
`xm.mark_step(...)` -> `torch_xla.sync(...)`, `xm.xla_device()`/`xm.xla_device(n)` ->
`torch_xla.device()`/`torch_xla.device(n)` (not with `devkind=`),
`xm.xrt_world_size()` -> `xr.world_size()`, `xm.get_ordinal()` ->
`xr.global_ordinal()` (no fix with a `defval` argument). The fix adds
`import torch_xla` / `import torch_xla.runtime as xr` when needed and drops a
`from ... import` of the old name once nothing uses it.

## Example
```python
import torch_xla.core.xla_model as xm
device = xm.xla_device()
xm.mark_step()
# becomes
import torch_xla
import torch_xla.core.xla_model as xm

device = torch_xla.device()
torch_xla.sync()
```
"""

    VALID = [
        Valid(
            """
            import torch_xla
            import torch_xla.core.xla_model as xm
            device = torch_xla.device()
            torch_xla.sync()
            xm.optimizer_step(opt)
            """
        ),
        # Names, not text: a local `mark_step`, a string, an unrelated `xm`.
        Valid(
            """
            import torch
            def mark_step():
                pass
            mark_step()
            print("call xm.mark_step() each step")
            xm.mark_step()
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            device = xm.xla_device()
            for x in loader:
                xm.mark_step()
            """,
            fixed="""
            import torch_xla
            import torch_xla.core.xla_model as xm

            device = torch_xla.device()
            for x in loader:
                torch_xla.sync()
            """,
            count=2,
        ),
        # Through a `from` import: the old name's import goes once unused.
        Invalid(
            """
            from torch_xla.core.xla_model import mark_step, xla_device, optimizer_step
            dev = xla_device(1)
            mark_step(wait=True)
            """,
            fixed="""
            import torch_xla
            from torch_xla.core.xla_model import optimizer_step

            dev = torch_xla.device(1)
            torch_xla.sync(wait=True)
            """,
            count=2,
        ),
        # `devkind` has no counterpart in torch_xla.device: reported, not fixed.
        Invalid(
            """
            from torch_xla.core import xla_model
            dev = xla_model.xla_device(devkind="TPU")
            """,
            count=1,
        ),
        # Target 2.6: xrt_world_size/get_ordinal warn (removed in 2.7); mark_step does not.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            world = xm.xrt_world_size()
            rank = xm.get_ordinal(defval=0)
            xm.mark_step()
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr

            world = xr.world_size()
            rank = xm.get_ordinal(defval=0)
            xm.mark_step()
            """,
            count=2,
            target_version="2.6",
        ),
    ]
