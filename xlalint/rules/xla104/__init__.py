"""The parts of XLA104 (cuda-device), one concern each; the rule itself, its
documentation and its examples are in ``xlalint/rules/xla104_cuda_device.py``.

- ``writer``: how a finding is reported (once per node) and what a fix writes;
- ``device_args``: device strings and arguments, ``.cuda()``, ``map_location``, int devices;
- ``availability``: ``torch.cuda.is_available()`` where it chooses the device;
- ``cuda_api``: the table of ``torch.cuda.*`` / ``torch.accelerator.*`` calls
  (``xlalint/rules/_cuda_api.py``): remove, replace, memory queries, the current accelerator;
- ``amp``: CUDA autocast and the ``GradScaler``;
- ``streams``: stream and device contexts, streams and events;
- ``removal``: removing an object with every use of it (the scaler, a stream);
- ``process_groups``: the NCCL backend, DDP's device ids, shared memory.

Which expression is a device, what a variable holds, whether a branch is the CUDA path
and whether code runs at import time are facts other rules need too: they are the
``ctx.devices`` analysis (``xlalint/analysis/devices.py``).
"""
