"""What XLA104 does with each ``torch.cuda.*`` name when the port targets TorchTPU, as data.

TorchTPU (``torch-tpu`` 0.2.0) mirrors ``torch.cuda`` with ``torch.tpu``, and its user
guide's api_mapping notebook maps one to the other name for name. The wheel disagrees for
part of it: from torch 2.11 on, ``torch.tpu.is_available()``, ``device_count()``,
``current_device()``, ``set_device()``, ``synchronize()``, ``current_stream()``,
``set_stream()`` and ``torch.tpu.device(...)`` are internal, and a call from a script
raises ``RuntimeError: is_available is internal to TorchTPU ... Use
torch.accelerator.is_available instead`` (seen on a CPU host with torch 2.13.0). The
table follows the wheel: ``rules/data/torch_tpu_api.json`` (written by
``tools/torch_tpu_api.py``) lists the public names and the internal ones with what to
use instead, and a test checks every name below against it.

A row reads:
- ``action``: ``"rename"`` the called name to ``target`` (the arguments stay);
  ``"remove"`` the statement that is nothing but the call; ``"report"`` it without a fix.
- ``target``: the name the fix writes, ``torch.`` spelled as the file imports torch.
- ``message``: what the finding says (``{name}``: the CUDA name).
A ``torch.cuda`` name missing from the table is reported with ``NO_COUNTERPART``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class TpuApi:
    action: Literal["rename", "remove", "report"]
    message: str
    target: str | None = None


def _rename(target: str) -> TpuApi:
    return TpuApi("rename", f"`torch.cuda.{{name}}`: on TorchTPU `{target}`", target)


NO_COUNTERPART = TpuApi(
    "report", "`torch.cuda.{name}` has no TorchTPU counterpart: remove it or keep it off the TPU path"
)
_MEMORY_QUERY = TpuApi("report", "`torch.cuda.{name}()` reads CUDA's allocator: TorchTPU has no allocator statistics")
_MEMORY_RESET = TpuApi("remove", "`torch.cuda.{name}()` resets CUDA allocator statistics: TorchTPU has none, remove it")
_TENSOR_TYPE = TpuApi(
    "report", '`torch.cuda.{name}` is a CUDA tensor type: use `torch.tensor(..., dtype=..., device="tpu")`'
)

CUDA_TO_TPU: dict[str, TpuApi] = {
    # -- the device: `torch.accelerator` where the `torch.tpu` name is internal --------
    "is_available": _rename("torch.accelerator.is_available"),
    "device_count": _rename("torch.accelerator.device_count"),
    "current_device": _rename("torch.accelerator.current_device_index"),
    "set_device": _rename("torch.accelerator.set_device_index"),
    "synchronize": _rename("torch.accelerator.synchronize"),
    "get_device_name": _rename("torch.tpu.get_device_name"),
    "get_device_properties": _rename("torch.tpu.get_device_properties"),
    "is_initialized": _rename("torch.tpu.is_initialized"),
    "init": TpuApi("remove", "`torch.cuda.init()` initializes CUDA: TorchTPU initializes itself, remove it"),
    # -- random numbers --------------------------------------------------------------
    "manual_seed": _rename("torch.tpu.manual_seed"),
    "manual_seed_all": _rename("torch.tpu.manual_seed_all"),
    "get_rng_state": TpuApi(
        "report", "`torch.cuda.get_rng_state()`: on TorchTPU `torch.accelerator.random.get_rng_state()` (torch 2.13+)"
    ),
    "initial_seed": TpuApi(
        "report", "`torch.cuda.initial_seed()`: on TorchTPU `torch.accelerator.random.initial_seed()` (torch 2.13+)"
    ),
    "set_rng_state": TpuApi("report", "`torch.cuda.set_rng_state()`: on TorchTPU `torch.tpu.set_rng_state()`"),
    # -- mixed precision: `torch.amp.autocast("tpu", ...)` is written by the rule --------
    "get_amp_supported_dtype": _rename("torch.tpu.get_amp_supported_dtype"),
    # -- memory ----------------------------------------------------------------------
    "empty_cache": TpuApi("remove", "`torch.cuda.empty_cache()` frees CUDA's cache: TorchTPU has none, remove it"),
    **{
        name: _MEMORY_QUERY
        for name in (
            "memory_allocated",
            "max_memory_allocated",
            "memory_reserved",
            "max_memory_reserved",
            "memory_cached",
            "max_memory_cached",
            "memory_stats",
            "memory_summary",
            "mem_get_info",
        )
    },
    **{
        name: _MEMORY_RESET
        for name in ("reset_peak_memory_stats", "reset_max_memory_allocated", "reset_accumulated_memory_stats")
    },
    # -- streams and events: placeholders that keep CUDA code running ------------------
    "Stream": _rename("torch.tpu.Stream"),
    "Event": _rename("torch.tpu.Event"),
    "stream": _rename("torch.tpu.stream"),
    "current_stream": _rename("torch.accelerator.current_stream"),
    "set_stream": _rename("torch.accelerator.set_stream"),
    "device": _rename("torch.accelerator.device_index"),
    # -- tensor types ----------------------------------------------------------------
    **{
        f"{kind}Tensor": _TENSOR_TYPE
        for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
    },
}

# The CUDA autocast: `torch.cuda.amp.autocast(...)` -> `torch.amp.autocast("tpu", ...)`.
CUDA_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
# The CUDA loss scaler, removed with its uses where the autocast becomes bfloat16.
CUDA_GRAD_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
# TorchTPU's collective backend, for `init_process_group(backend="nccl")`: the guide's
# distributed_training_101 uses "tpu_dist" (the wheel registers "tpu" and "tpu_dist").
DISTRIBUTED_BACKEND = "tpu_dist"
# The device type: "cuda" -> "tpu", "cuda:1" -> "tpu:1".
DEVICE_TYPE = "tpu"

_REEXPORTING_SUBMODULES = ("memory.", "random.", "streams.", "graphs.")


def lookup(qualified: str) -> tuple[str, TpuApi] | None:
    """The row for a ``torch.cuda.*`` name: (the name as the message shows it, the row)."""
    if not qualified.startswith("torch.cuda."):
        return None
    rest = qualified[len("torch.cuda.") :]
    for submodule in _REEXPORTING_SUBMODULES:
        if rest.startswith(submodule) and rest[len(submodule) :] in CUDA_TO_TPU:
            rest = rest[len(submodule) :]
    return rest, CUDA_TO_TPU.get(rest, NO_COUNTERPART)


def written_names() -> set[str]:
    """Every ``torch.tpu``/``torch.accelerator`` name a fix of this table can write."""
    return {row.target for row in CUDA_TO_TPU.values() if row.target}
