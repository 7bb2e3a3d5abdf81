"""``PJRT_DEVICE=CUDA`` from a bare PJRT CUDA plugin library (stdlib only; runs inside the
user's processes as ``_xlalint_cuda``; see ``bootstrap.py``)."""

from __future__ import annotations

import os

#: A bare PJRT CUDA plugin library (xla-cuda12-pjrt) to register as the CUDA device.
CUDA_LIBRARY_ENV = "XLALINT_CUDA_PJRT_LIBRARY"


def register_cuda_plugin(library: str) -> None:
    """Make ``PJRT_DEVICE=CUDA`` load ``library``, a bare PJRT CUDA plugin.

    torch_xla 2.9 has no built-in XLA:CUDA and registers only plugins that declare a
    ``torch_xla.plugins`` entry point; xla-cuda12-pjrt ships just the PJRT library,
    so it is wrapped in a ``DevicePlugin`` here, in every process (spawned workers
    do not inherit the parent's registry). The options follow torch_xla's own CUDA
    plugin: one process per GPU, ranks from the launcher's environment.
    """
    from torch_xla.experimental import plugins

    def number(name: str, default: int) -> int:
        return int(os.environ.get(name, default))

    class BareCudaPlugin(plugins.DevicePlugin):
        def library_path(self) -> str:
            return library

        def physical_chip_count(self) -> int:
            return number("GPU_NUM_DEVICES", 1)

        def client_create_options(self) -> dict:
            local_rank = number("LOCAL_RANK", 0)
            local_world = number("LOCAL_WORLD_SIZE", 1)
            return {
                "platform_name": "gpu",
                "allocator": "default",
                "visible_devices": [local_rank],
                "node_id": number("RANK", local_rank),
                "num_nodes": number("WORLD_SIZE", local_world),
            }

        def requires_xla_coordinator(self) -> bool:
            return True

    plugins.use_dynamic_plugins()
    plugins.register_plugin("CUDA", BareCudaPlugin())
