"""Which rules a port to each runtime needs, as data.

``target-runtime = "torch-xla"`` (the default) runs every rule. ``"torch-tpu"`` ports to
TorchTPU (``torch-tpu`` 0.2.0, Google's PyTorch TPU backend: a ``tpu`` device and a
``torch.tpu`` module that mirrors ``torch.cuda``). A rule there either applies as it
is, applies with another meaning or fix (``changed``), or does not apply: what it
checks is torch_xla's own (its sync, loader, launcher, FSDP, a bug of torch_xla 2.9),
or it was measured on torch_xla and nobody has measured it on TorchTPU.

Each decision names its source: the TorchTPU user guide's notebooks (``docs/notebooks``
of the TorchTPU repository: eager_mode, deferred_execution, api_mapping,
distributed_training_101), or the ``torch-tpu`` 0.2.0 wheel itself. None of it has run on
a TPU here: every TorchTPU fix is unsafe (``engine/lint.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from xlalint.engine.config import TORCH_TPU, TORCH_XLA, Settings
from xlalint.model import Fix

__all__ = ["TORCH_TPU", "TORCH_XLA", "active_codes", "runs_under", "writes_torch_xla"]

Scope = Literal["applies", "changed", "not applicable"]


@dataclass(frozen=True)
class RuleScope:
    scope: Scope
    why: str
    source: str


_GUIDE = "TorchTPU user guide"
_DEFERRED = f"{_GUIDE}, deferred_execution (materialization triggers)"
_EAGER = f"{_GUIDE}, eager_mode (the default Strict Eager mode)"
_DISTRIBUTED = f"{_GUIDE}, distributed_training_101 (torchrun, `tpu_dist`, DDP)"
_MAPPING = f"{_GUIDE}, api_mapping (`torch.cuda` -> `torch.tpu`)"
_WHEEL = "torch-tpu 0.2.0 wheel, `torch_tpu/_loader.py`"
_XLA_ONLY = "what it checks exists only in torch_xla"
_UNMEASURED = "measured on torch_xla 2.9.0 only; not established for TorchTPU"

# code -> how the rule stands under `target-runtime = "torch-tpu"`.
TORCH_TPU_SCOPE: dict[str, RuleScope] = {
    "XLA100": RuleScope("applies", "xlalint's own noqa bookkeeping", "-"),
    "XLA101": RuleScope("applies", "a new batch shape is a new graph to compile", _DEFERRED),
    "XLA102": RuleScope(
        "not applicable",
        "by default ops run as they come and a host read waits as on CUDA; a graph break only when fusing",
        _EAGER,
    ),
    "XLA103": RuleScope("not applicable", "ops are dispatched as they come; there is no step sync to add", _EAGER),
    "XLA104": RuleScope("changed", "`torch.cuda` -> `torch.tpu`, the `cuda` device -> `tpu`", _MAPPING),
    "XLA105": RuleScope("not applicable", "workers are started by torchrun, not by an `_mp_fn` launcher", _DISTRIBUTED),
    "XLA106": RuleScope("applies", "the AMP order (unscale, clip, step) is PyTorch's, whatever the device", _MAPPING),
    "XLA201": RuleScope("not applicable", "`torch.save` materializes and writes; there is no `xm.save`", _DEFERRED),
    "XLA202": RuleScope("not applicable", _XLA_ONLY + " (a torch_xla multi-process script)", _DISTRIBUTED),
    "XLA203": RuleScope(
        "not applicable", "DDP reduces the gradients; `xm.optimizer_step` is torch_xla's", _DISTRIBUTED
    ),
    "XLA204": RuleScope("not applicable", _XLA_ONLY + " (`xm.broadcast_master_param`)", _DISTRIBUTED),
    "XLA205": RuleScope("not applicable", _XLA_ONLY + " (`xmp.spawn`)", _DISTRIBUTED),
    "XLA206": RuleScope("not applicable", _XLA_ONLY + " (XLA:GPU)", _DISTRIBUTED),
    "XLA207": RuleScope(
        "not applicable",
        "the same hang exists (the guide's 'never diverge'), but the rule finds ranks through torch_xla's APIs",
        _DISTRIBUTED,
    ),
    "XLA208": RuleScope("not applicable", _XLA_ONLY + " (the PJRT runtime before `xmp.spawn`)", _DISTRIBUTED),
    "XLA209": RuleScope("not applicable", _XLA_ONLY + " (torch_xla's FSDP)", _DISTRIBUTED),
    "XLA210": RuleScope("not applicable", _XLA_ONLY + " (`xr.use_spmd()`)", _DISTRIBUTED),
    "XLA301": RuleScope("applies", "the last, smaller batch is a new shape to compile", _DEFERRED),
    "XLA302": RuleScope("applies", "data-dependent shapes force materialization", _DEFERRED),
    "XLA303": RuleScope("applies", "longer inputs keep their length: new shapes", _DEFERRED),
    "XLA304": RuleScope("not applicable", "the fallback table is torch_xla's lowering; " + _UNMEASURED, _WHEEL),
    "XLA305": RuleScope(
        "changed",
        '`torch.compile` with no backend uses TorchTPU; only an explicit `backend="inductor"` raises',
        _WHEEL,
    ),
    "XLA306": RuleScope("not applicable", _UNMEASURED, "-"),
    "XLA307": RuleScope("applies", "a tensor that grows every iteration is a new shape every iteration", _DEFERRED),
    "XLA308": RuleScope("not applicable", "a torch_xla 2.9 bug; " + _UNMEASURED, "-"),
    "XLA309": RuleScope("not applicable", "a torch_xla 2.9 bug; " + _UNMEASURED, "-"),
    "XLA310": RuleScope(
        "not applicable", "TorchTPU registers as `privateuseone`, a device torch's fused kernels list", _WHEEL
    ),
    "XLA401": RuleScope("not applicable", "torch_xla versions; XLA601 reports torch_xla calls", "-"),
    "XLA402": RuleScope("not applicable", "torch_xla versions; XLA601 reports torch_xla calls", "-"),
    "XLA501": RuleScope(
        "applies",
        "not measured on TorchTPU; the fix (move the model before building the optimizer) is right either way",
        "-",
    ),
    "XLA502": RuleScope(
        "applies", "not measured on TorchTPU; the fix (tie again after the move) is right either way", "-"
    ),
    "XLA503": RuleScope("not applicable", _XLA_ONLY + " (its CSE and `torch_xla.utils.checkpoint`)", "-"),
    "XLA601": RuleScope("applies", "torch_xla calls in a script ported to TorchTPU", _MAPPING),
}

# Rules that exist only for one runtime (the migration from torch_xla).
ONLY_FOR: dict[str, str] = {"XLA601": TORCH_TPU}


def runs_under(code: str, runtime: str) -> bool:
    """Whether the rule ``code`` runs when the port targets ``runtime``."""
    only = ONLY_FOR.get(code)
    if only is not None:
        return only == runtime
    if runtime == TORCH_TPU:
        # A rule added later and not yet decided here does not run on TorchTPU.
        scope = TORCH_TPU_SCOPE.get(code)
        return scope is not None and scope.scope != "not applicable"
    return True


def active_codes(settings: Settings, codes: Iterable[str], path: str | None = None) -> set[str]:
    """The codes that run: those the settings enable, less those the runtime does not need."""
    return {code for code in settings.enabled_codes(codes, path) if runs_under(code, settings.target_runtime)}


def writes_torch_xla(fix: Fix) -> bool:
    """Whether ``fix`` brings torch_xla in: an import of it, or code that names it
    (``"xla"`` devices are torch_xla's). A port to TorchTPU never does."""
    if any(i.module == "torch_xla" or i.module.startswith("torch_xla.") for i in fix.imports):
        return True
    for op in fix.operations:
        text = " ".join(str(getattr(op, field, "")) for field in ("template", "code", "value"))
        if "torch_xla" in text or '"xla"' in text or "'xla'" in text or "xla:" in text:
            return True
    return False
