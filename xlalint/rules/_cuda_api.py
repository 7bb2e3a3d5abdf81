"""What XLA104 does with each ``torch.cuda.*`` and ``torch.accelerator.*`` API, as data.

One table, one row per name: adding a name (or a new torch_xla replacement) is one
row, not new code. The rule reads a row as:

- ``action``: ``"replace"`` the call with ``template``; ``"remove"`` the statement
  that is nothing but the call; ``"report"`` it without a fix; ``"query"``: a CUDA
  allocator statistic, reported with its XLA counterpart and never fixed: a number
  written in its place (``0``, what it returns without CUDA) would be a value the
  device never reported (a log line then prints a fake "0 MiB"); ``"wait"``: a wait for
  the device, ported as ``torch_xla.sync()`` then ``xm.wait_device_ops()`` (the wait
  alone runs nothing: the lazy graph is still pending); ``"device"`` (the call
  *is* the device: replaced like any CUDA device); ``"context"``: a context manager
  with no meaning on XLA (a stream, a device): ``with <it>:`` is replaced by its body;
  ``"stream"``: a stream or event object, removed with every use when each use orders
  streams or waits for them (see the rule); ``"autocast"`` / ``"grad_scaler"``
  (the rule's own fixes); ``"availability"`` (False on an XLA machine: see the
  rule's availability part); ``"tensor_type"`` (``torch.cuda.FloatTensor`` and kin: the
  CPU type moved to the device, see the rule's tensor_types part).
- ``template``: the replacement code. ``{xm}``, ``{xr}``, ``{torch_xla}`` are the
  modules as the file spells them, ``{device}`` the XLA device, ``{sync}`` the sync call
  of the target version (``torch_xla.sync``), ``{manual_seed}`` the
  seeding function of the target version, ``{arg0}`` the call's first argument.
  ``arguments``: how many positional arguments the call must have for the template
  (no keywords); a call that does not fit is reported without a fix.
- ``message``: what the finding says; the same placeholders are spelled for the
  target version (``{device}`` is ``xm.xla_device()`` for targets before 2.4).

Every replacement was checked against torch_xla 2.9.0. ``xm.get_memory_info(device)`` is
named but not used as a fix: the CPU PJRT device has no allocator statistics and it
raises there (``GetAllocatorStats is not supported``), so a memory query is reported
for the user to port (or drop) rather than rewritten into a call that may crash. A
reset (``reset_peak_memory_stats()``) returns nothing and raises without CUDA
(``invalid argument to reset_peak_memory_stats``): the statement goes.
A ``torch.cuda`` name missing from the table is reported with ``DEFAULT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal[
    "replace",
    "remove",
    "report",
    "query",
    "wait",
    "device",
    "context",
    "stream",
    "autocast",
    "grad_scaler",
    "availability",
    "tensor_type",
]


@dataclass(frozen=True)
class CudaApi:
    action: Action
    message: str
    template: str | None = None
    arguments: int = 0
    applicability: Literal["safe", "unsafe"] = "safe"


def _report(message: str) -> CudaApi:
    return CudaApi("report", message)


def _remove(message: str) -> CudaApi:
    return CudaApi("remove", message)


_MEMORY_QUERY = CudaApi(
    "query",
    "`torch.cuda.{name}()` reads CUDA's allocator: on XLA read `{xm}.get_memory_info({device})`",
)
_MEMORY_RESET = _remove("`torch.cuda.{name}()` resets CUDA allocator statistics: XLA has none, remove it")
# On XLA a process has one device and no user streams: the compiler orders the work.
_STREAM = CudaApi("stream", "`torch.cuda.{name}`: XLA has no user streams")
_STREAM_CONTEXT = CudaApi("context", "`torch.cuda.{name}(...)`: XLA has no user streams")
_DEVICE_CONTEXT = CudaApi("context", "`torch.cuda.{name}(...)` selects a CUDA device; an XLA process has one")
_TENSOR_TYPE = CudaApi(
    "tensor_type", "`torch.cuda.{name}` is a CUDA tensor type: use `torch.tensor(..., dtype=..., device={device})`"
)
_NO_COUNTERPART = _report("`torch.cuda.{name}` has no XLA counterpart: remove it or keep it off the XLA path")

DEFAULT = _NO_COUNTERPART

CUDA_API: dict[str, CudaApi] = {
    # -- the device ------------------------------------------------------------------
    "is_available": CudaApi("availability", ""),
    "device_count": _report("`torch.cuda.device_count()`: `{xr}.world_size()` is the number of XLA processes"),
    "current_device": CudaApi(
        "replace",
        "`torch.cuda.current_device()`: the index of this process's XLA device is `{xr}.local_ordinal()`",
        template="{xr}.local_ordinal()",
        applicability="unsafe",
    ),
    "set_device": _remove("`torch.cuda.set_device()` has no meaning on XLA: each process has its device, remove it"),
    "device": _DEVICE_CONTEXT,
    "device_of": _DEVICE_CONTEXT,
    "get_device_name": _report("`torch.cuda.get_device_name()`: on XLA `{xm}.xla_device_hw({device})` names the kind"),
    "get_device_properties": _report(
        "`torch.cuda.get_device_properties()`: on XLA `{xm}.xla_device_hw({device})` names the kind"
    ),
    "get_device_capability": _report("`torch.cuda.get_device_capability()` is a CUDA compute capability: no XLA one"),
    "is_bf16_supported": CudaApi(
        "replace",
        "`torch.cuda.is_bf16_supported()`: XLA devices compute in bfloat16",
        template="True",
    ),
    "init": _remove("`torch.cuda.init()` initializes CUDA: remove it"),
    "is_initialized": _report("`torch.cuda.is_initialized()` asks about CUDA: no XLA counterpart"),
    "synchronize": CudaApi(
        "wait",
        "`torch.cuda.synchronize()` waits for CUDA kernels: on XLA `{sync}()`, then `{xm}.wait_device_ops()`",
    ),
    # -- random numbers --------------------------------------------------------------
    "manual_seed": CudaApi(
        "replace", "CUDA seed: use `{manual_seed}(...)`", template="{manual_seed}({arg0})", arguments=1
    ),
    "manual_seed_all": CudaApi(
        "replace", "CUDA seed: use `{manual_seed}(...)`", template="{manual_seed}({arg0})", arguments=1
    ),
    "seed": _report("`torch.cuda.seed()`: on XLA seed explicitly with `{manual_seed}(s)`"),
    "seed_all": _report("`torch.cuda.seed_all()`: on XLA seed explicitly with `{manual_seed}(s)`"),
    "initial_seed": _report("`torch.cuda.initial_seed()`: on XLA `{xm}.get_rng_state()` (an int seed)"),
    "get_rng_state": _report("`torch.cuda.get_rng_state()`: on XLA `{xm}.get_rng_state()` (an int seed, not a tensor)"),
    "get_rng_state_all": _report("`torch.cuda.get_rng_state_all()`: on XLA `{xm}.get_rng_state()` (an int seed)"),
    "set_rng_state": _report("`torch.cuda.set_rng_state()`: on XLA `{xm}.set_rng_state(seed)` (an int seed)"),
    "set_rng_state_all": _report("`torch.cuda.set_rng_state_all()`: on XLA `{xm}.set_rng_state(seed)` (an int seed)"),
    # -- memory ----------------------------------------------------------------------
    "empty_cache": _remove("`torch.cuda.empty_cache()` has no meaning on XLA: remove it"),
    "memory_allocated": _MEMORY_QUERY,
    "max_memory_allocated": _MEMORY_QUERY,
    "memory_reserved": _MEMORY_QUERY,
    "max_memory_reserved": _MEMORY_QUERY,
    "memory_cached": _MEMORY_QUERY,
    "max_memory_cached": _MEMORY_QUERY,
    "memory_stats": _MEMORY_QUERY,
    "memory_stats_as_nested_dict": _MEMORY_QUERY,
    "memory_summary": _MEMORY_QUERY,
    "memory_snapshot": _MEMORY_QUERY,
    "mem_get_info": _MEMORY_QUERY,
    "device_memory_used": _MEMORY_QUERY,
    "list_gpu_processes": _MEMORY_QUERY,
    "host_memory_stats": _MEMORY_QUERY,
    "reset_peak_memory_stats": _MEMORY_RESET,
    "reset_max_memory_allocated": _MEMORY_RESET,
    "reset_max_memory_cached": _MEMORY_RESET,
    "reset_accumulated_memory_stats": _MEMORY_RESET,
    "reset_peak_host_memory_stats": _MEMORY_RESET,
    "reset_accumulated_host_memory_stats": _MEMORY_RESET,
    "ipc_collect": _MEMORY_RESET,
    "set_per_process_memory_fraction": _report(
        "`torch.cuda.set_per_process_memory_fraction()`: XLA has no per-process memory fraction"
    ),
    "caching_allocator_alloc": _NO_COUNTERPART,
    "caching_allocator_delete": _NO_COUNTERPART,
    "MemPool": _NO_COUNTERPART,
    "use_mem_pool": _NO_COUNTERPART,
    # -- streams, events, graphs -----------------------------------------------------
    "Stream": _STREAM,
    "ExternalStream": _STREAM,
    "current_stream": _STREAM,
    "default_stream": _STREAM,
    "stream": _STREAM_CONTEXT,
    "StreamContext": _STREAM_CONTEXT,
    "set_stream": _remove("`torch.cuda.set_stream()`: XLA has no user streams"),
    "Event": CudaApi(
        "stream",
        "`torch.cuda.Event`: XLA has no CUDA events",
    ),
    "CUDAGraph": _report("`torch.cuda.CUDAGraph`: XLA compiles and caches the graph itself; remove it"),
    # Not unwrapped: the body is captured to run at each `g.replay()`, not run in place.
    "graph": _report("`torch.cuda.graph` captures its body for `.replay()`: XLA compiles and caches graphs itself"),
    "make_graphed_callables": _report(
        "`torch.cuda.make_graphed_callables`: XLA compiles and caches the graph itself; call the module directly"
    ),
    # -- profiling -------------------------------------------------------------------
    "nvtx.range_push": _report("`torch.cuda.nvtx`: on XLA use `torch_xla.debug.profiler.Trace(name)`"),
    "nvtx.range_pop": _report("`torch.cuda.nvtx`: on XLA use `torch_xla.debug.profiler.Trace(name)`"),
    "nvtx.range": _report("`torch.cuda.nvtx`: on XLA use `torch_xla.debug.profiler.Trace(name)`"),
    "nvtx.mark": _report("`torch.cuda.nvtx`: on XLA use `torch_xla.debug.profiler.Trace(name)`"),
    "profiler.start": _report("`torch.cuda.profiler`: on XLA use `torch_xla.debug.profiler`"),
    "profiler.stop": _report("`torch.cuda.profiler`: on XLA use `torch_xla.debug.profiler`"),
    "utilization": _NO_COUNTERPART,
    "temperature": _NO_COUNTERPART,
    "power_draw": _NO_COUNTERPART,
    "clock_rate": _NO_COUNTERPART,
    "memory_usage": _NO_COUNTERPART,
    "set_sync_debug_mode": _NO_COUNTERPART,
    "get_sync_debug_mode": _NO_COUNTERPART,
    # -- collectives -----------------------------------------------------------------
    "comm.broadcast": _report(
        "`torch.cuda.comm`: on XLA use `{xm}.all_reduce` / `{xm}.all_gather` / `{xm}.collective_broadcast`"
    ),
    "comm.reduce_add": _report("`torch.cuda.comm`: on XLA use `{xm}.all_reduce`"),
    "comm.scatter": _report("`torch.cuda.comm`: on XLA use `{xm}.reduce_scatter`"),
    "comm.gather": _report("`torch.cuda.comm`: on XLA use `{xm}.all_gather`"),
    "nccl.all_reduce": _report("`torch.cuda.nccl`: on XLA use `{xm}.all_reduce`"),
    # -- mixed precision -------------------------------------------------------------
    "amp.autocast": CudaApi("autocast", ""),
    "amp.autocast_mode.autocast": CudaApi("autocast", ""),
    "amp.custom_fwd": _report('`torch.cuda.amp.custom_fwd`: use `torch.amp.custom_fwd(device_type="xla")`'),
    "amp.custom_bwd": _report('`torch.cuda.amp.custom_bwd`: use `torch.amp.custom_bwd(device_type="xla")`'),
    "amp.GradScaler": CudaApi("grad_scaler", ""),
    "amp.grad_scaler.GradScaler": CudaApi("grad_scaler", ""),
    # -- tensor types ----------------------------------------------------------------
    **{
        f"{kind}Tensor": _TENSOR_TYPE
        for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
    },
}

# `torch.accelerator` (torch >= 2.6) names whatever accelerator torch was built for; on a
# torch_xla machine it is not the XLA device (`is_available()` is False).
ACCELERATOR_API: dict[str, CudaApi] = {
    "is_available": CudaApi("availability", ""),
    "current_accelerator": CudaApi("device", "`torch.accelerator.current_accelerator()` is not the XLA device"),
    "synchronize": CudaApi(
        "wait",
        "`torch.accelerator.synchronize()` waits for kernels: on XLA `{sync}()`, then `{xm}.wait_device_ops()`",
    ),
    "device_count": _report("`torch.accelerator.device_count()`: `{xr}.world_size()` is the number of XLA processes"),
    "current_device_index": CudaApi(
        "replace",
        "`torch.accelerator.current_device_index()`: the XLA device's index is `{xr}.local_ordinal()`",
        template="{xr}.local_ordinal()",
        applicability="unsafe",
    ),
    "current_device_idx": CudaApi(
        "replace",
        "`torch.accelerator.current_device_idx()`: the XLA device's index is `{xr}.local_ordinal()`",
        template="{xr}.local_ordinal()",
        applicability="unsafe",
    ),
    "device_index": CudaApi(
        "context", "`torch.accelerator.device_index(...)` selects a device; an XLA process has one"
    ),
    "current_stream": CudaApi("stream", "`torch.accelerator.current_stream()`: XLA has no user streams"),
    "set_stream": _remove("`torch.accelerator.set_stream()`: XLA has no user streams"),
    "set_device_index": _remove("`torch.accelerator.set_device_index()` has no meaning on XLA: remove it"),
    "set_device_idx": _remove("`torch.accelerator.set_device_idx()` has no meaning on XLA: remove it"),
    "empty_cache": _remove("`torch.accelerator.empty_cache()` has no meaning on XLA: remove it"),
    "memory_allocated": _MEMORY_QUERY,
    "max_memory_allocated": _MEMORY_QUERY,
    "memory_reserved": _MEMORY_QUERY,
    "max_memory_reserved": _MEMORY_QUERY,
    "memory_stats": _MEMORY_QUERY,
    "reset_peak_memory_stats": _MEMORY_RESET,
    "reset_accumulated_memory_stats": _MEMORY_RESET,
}

# `torch.cuda.memory.empty_cache` is `torch.cuda.empty_cache`: submodules whose names the
# package re-exports.
_REEXPORTING_SUBMODULES = ("memory.", "random.", "streams.", "graphs.")

CUDA_PREFIX = "torch.cuda."
ACCELERATOR_PREFIX = "torch.accelerator."


def lookup(qualified: str) -> tuple[str, CudaApi] | None:
    """The row for a qualified name: (the name as the message shows it, the row)."""
    if qualified.startswith(ACCELERATOR_PREFIX):
        rest = qualified[len(ACCELERATOR_PREFIX) :]
        for submodule in ("memory.",):
            rest = rest.removeprefix(submodule)
        row = ACCELERATOR_API.get(rest)
        return (rest, row) if row is not None else None
    if not qualified.startswith(CUDA_PREFIX):
        return None
    rest = qualified[len(CUDA_PREFIX) :]
    if rest in CUDA_API:
        return rest, CUDA_API[rest]
    for submodule in _REEXPORTING_SUBMODULES:
        if rest.startswith(submodule) and rest[len(submodule) :] in CUDA_API:
            short = rest[len(submodule) :]
            return short, CUDA_API[short]
    return rest, DEFAULT


# -- torch.distributed in a CUDA script ------------------------------------------------------
# Not `torch.cuda` names, but as CUDA-only: the collective backend, DDP's device indices,
# and memory shared between processes. Checked against torch 2.9.0 and torch_xla 2.9.0.

# The collective backend that runs only on CUDA tensors (torch lowercases backend names).
CUDA_BACKENDS = frozenset({"nccl"})
# `torch.distributed.Backend.NCCL`, the same string spelled as a constant.
CUDA_BACKEND_CONSTANTS = frozenset(
    {"torch.distributed.Backend.NCCL", "torch.distributed.distributed_c10d.Backend.NCCL"}
)
INIT_PROCESS_GROUP = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
)
# torch_xla's way (its DDP guide): `import torch_xla.distributed.xla_backend` registers the
# "xla" backend for the "xla" device and the "xla://" rendezvous, which takes each process's
# rank and the world size from the XLA runtime (`xr.global_ordinal()`, `xr.world_size()`)
# and, under torchrun, tells the runtime which local device is this process's.
XLA_BACKEND = "xla"
XLA_INIT_METHOD = "xla://"
XLA_BACKEND_MODULE = "torch_xla.distributed.xla_backend"
# The init_method "xla://" replaces without losing anything: both read MASTER_ADDR/MASTER_PORT.
ENV_INIT_METHOD = "env://"
# Given with "xla://", these are ignored: the XLA runtime's values are used.
RUNTIME_GIVEN_ARGUMENTS = ("world_size", "rank")

DISTRIBUTED_DATA_PARALLEL = frozenset(
    {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}
)
# DDP's CUDA device indices. For a module on the XLA device DDP keeps `device_ids` and moves
# each input to `xla:<index>` on a CUDA-style side stream: for any index but the process's
# own device that raises (`'NoneType' object does not support the context manager protocol`).
DDP_DEVICE_KEYWORDS = ("device_ids", "output_device")

# `Module.share_memory()` and `Tensor.share_memory_()`: shared memory between processes,
# CPU tensors only (`RuntimeError: _share_fd_: only available on CPU` for an XLA tensor).
SHARE_MEMORY_METHODS = frozenset({"share_memory", "share_memory_"})
