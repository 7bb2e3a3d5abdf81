"""XLA208 runtime-before-launch: the parent starts the XLA runtime before it starts its
workers.

``xmp.spawn``/``torch_xla.launch`` start one worker per device, and each worker starts
the XLA runtime for its own device. A parent that has already started it (by asking for
the device, the world size, or by making an XLA tensor) leaves every worker to fail with
"Runtime is already initialized". The parent must not touch the XLA device at all.
"""

from __future__ import annotations

from xlalint.analysis.launch import RUNTIME_STARTERS_VERSION
from xlalint.engine.rule import Invalid, Rule, Valid


class RuntimeBeforeLaunch(Rule):
    code = "XLA208"
    name = "runtime-before-launch"
    summary = "The XLA runtime is started in the parent before the workers are launched"
    explanation = f"""
## Why

`xmp.spawn(fn)` and `torch_xla.launch(fn)` start one process per device; each worker
starts the XLA runtime (the PJRT client) for its own device. When the parent has
started the runtime already, every worker fails at its first use of the device:

```
RuntimeError: Runtime is already initialized. Do not use the XLA device before calling xmp.spawn.
```

Reproduced on {RUNTIME_STARTERS_VERSION} CPU (`PJRT_DEVICE=CPU`) for each call listed
below made before `torch_xla.launch(_mp_fn)`; the same script with the call moved into
`_mp_fn` runs (the test `tests/rules/test_xla208.py` runs both). `xr.device_type()` only
reads the configured device type and does not start the runtime.

## What is flagged

In a script that starts workers with `xmp.spawn`/`torch_xla.launch`, a call on the
parent's path before the launch (module level, the `if __name__ == "__main__":` block
before the call, and the same-module functions they call first) that starts the
runtime: `torch_xla.device()`, `xm.xla_device()`, `xr.world_size()`,
`xr.global_runtime_device_count()`, `xr.global_device_count()`, `xr.global_ordinal()`,
`xm.get_xla_supported_devices()`, `.to("xla")`,
`torch.device("xla")` given to `.to`, and a tensor made with `device="xla"`. Calls in
the function given to the launcher run in the workers and are not flagged.

## Fix

None: move the call into the worker function (the parent can pass what the workers
need as arguments). To test for XLA in the parent without starting the runtime, use
`xr.device_type()`.

## Example

```python
device = torch_xla.device()

def _mp_fn(index):
    train(device)

if __name__ == "__main__":
    torch_xla.launch(_mp_fn)
```
becomes
```python
def _mp_fn(index):
    device = torch_xla.device()
    train(device)

if __name__ == "__main__":
    torch_xla.launch(_mp_fn)
```
"""
    fix_availability = "none"

    VALID = [
        # The device is asked for in the worker.
        Valid(
            """
            import torch_xla
            def _mp_fn(index):
                device = torch_xla.device()
            if __name__ == "__main__":
                torch_xla.launch(_mp_fn)
            """
        ),
        # xr.device_type() does not start the runtime.
        Valid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            import torch_xla.distributed.xla_multiprocessing as xmp
            def _mp_fn(index):
                pass
            if __name__ == "__main__":
                if xr.device_type() == "TPU":
                    xmp.spawn(_mp_fn)
            """
        ),
        # No launch in this file: a module run by another launcher.
        Valid(
            """
            import torch_xla
            device = torch_xla.device()
            def _mp_fn(index):
                pass
            """
        ),
        # After the launch returns, the workers are done.
        Valid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            def _mp_fn(index):
                pass
            if __name__ == "__main__":
                torch_xla.launch(_mp_fn)
                print(xr.world_size())
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            device = torch_xla.device()
            def _mp_fn(index):
                print(xr.world_size())
            if __name__ == "__main__":
                torch_xla.launch(_mp_fn)
            """,
            count=1,
        ),
        # On the __main__ path, through a function it calls before the launch.
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            import torch_xla.distributed.xla_multiprocessing as xmp
            def setup():
                print("devices:", xr.global_runtime_device_count())
                return torch.zeros(1, device="xla")
            def _mp_fn(index, flags):
                pass
            def main():
                flags = setup()
                xmp.spawn(_mp_fn, args=(flags,))
            if __name__ == "__main__":
                main()
            """,
            count=2,
        ),
    ]

    def finish(self) -> None:
        parallelism = self.ctx.parallelism
        if not parallelism.launches:
            return
        launch = self.ctx.launch
        first = min(parallelism.launches, key=lambda c: (c.lineno, c.col_offset))
        launcher = self.ctx.source_of(first.func)
        for call in launch.parent_calls():
            if launch.starts_runtime(call):
                what = self.ctx.source_of(call)
                if len(what) > 30 or "\n" in what:
                    what = self.ctx.source_of(call.func) + "(...)"
                self.report(
                    call,
                    f"`{what}` starts the XLA runtime before `{launcher}(...)` (line {first.lineno}): the workers fail",
                )
