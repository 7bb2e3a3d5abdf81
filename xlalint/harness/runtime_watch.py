"""What the harness child watches for at run time: the silent bugs of XLA501 and XLA502,
and the loss values a run trains on.

Like ``bootstrap.py`` this file uses only the standard library and runs inside the
child processes (copied next to the bootstrap as ``_xlalint_runtime_watch``). It never
changes what the script computes and never reads a device value while the script runs:

- *a move that unties weights* (XLA502): ``nn.Module.to`` to an XLA device is wrapped;
  parameters that were one object before the move (``named_parameters(remove_duplicate=False)``)
  and are two after, and still two when the first optimizer steps (or the script ends),
  are reported at the user's line that moved the model;
- *an optimizer that steps parameters left behind by a move* (XLA501): the same wrapper
  notes the CPU parameters a move replaced; at an optimizer's first step (torch's global
  step pre-hook) its parameters that are such leftovers are reported at the user's line
  that built the optimizer (``Optimizer.__init__`` notes it);
- *the loss*: the first scalars passed to ``Tensor.backward`` on the XLA device and the
  last one, kept (detached) and read once when the script ends, so a run whose loss
  never changed can be said to be one; and the loss of each optimizer step (the latest
  scalar before it, on any device), for the loss trajectory ``--compare`` checks. The
  loss is the user's: a ``GradScaler.scale(loss)`` (timm's ``NativeScaler`` calls it)
  notes the loss it is given, and the scaled value it returns is not noted again.

Findings and losses go to ``runtime-<pid>.json`` in the harness's output folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import weakref

RUNTIME_PREFIX = "runtime-"
FIRST_LOSSES_KEPT = 3
#: Per-step losses kept (the first steps): a run bounded by ``--steps`` keeps all.
STEP_LOSSES_KEPT = 1000
_SCALED = "_xlalint_scaled_loss"  # set on what GradScaler.scale returned
_MAX_FRAMES_UP = 40


class RuntimeWatch:
    def __init__(self) -> None:
        self.findings: list[dict] = []
        self._reported: set[tuple] = set()
        # ids of CPU parameters that a move to the XLA device replaced by new ones. Only
        # ids: keeping the tensors would keep the model's CPU copy alive.
        self._left_behind: set[int] = set()
        self._optimizer_sites: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._stepped: set[int] = set()
        # Moves that split tied parameters: (the module, the names once tied, site, message).
        self._untied: list[tuple] = []
        self._first_losses: list = []
        self._last_loss = None
        self.backward_calls = 0
        self.loss_values: list[float] | None = None
        self._user_frame = None
        self._latest_loss = None  # the loss noted since the last step, any device
        self._step_losses: list = []  # per optimizer step: the latest loss before it, or None
        self.step_loss_values: list[float | None] = []

    # -- installing -----------------------------------------------------------------------
    def install(self, torch, user_frame) -> None:
        """Wrap ``Module.to``, ``Optimizer.__init__`` and ``Tensor.backward`` and add a
        global optimizer step pre-hook. ``user_frame(frame)`` finds the innermost frame
        of the user's code at or above ``frame``."""
        self._user_frame = user_frame
        watch = self
        module_to = torch.nn.Module.to

        def to(module, *args, **kwargs):
            before = watch._before_move(torch, module, args, kwargs)
            moved = module_to(module, *args, **kwargs)
            if before is not None:
                with contextlib.suppress(Exception):  # never break the script
                    watch._after_move(moved, before, sys._getframe(1))
            return moved

        to.__doc__ = module_to.__doc__
        torch.nn.Module.to = to

        optimizer_init = torch.optim.Optimizer.__init__

        def init(optimizer, *args, **kwargs):
            optimizer_init(optimizer, *args, **kwargs)
            with contextlib.suppress(Exception):
                frame = user_frame(sys._getframe(1))
                if frame is not None:
                    watch._optimizer_sites[optimizer] = (frame.f_code.co_filename, frame.f_lineno)

        torch.optim.Optimizer.__init__ = init
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(self._on_step)

        backward = torch.Tensor.backward

        def backward_noting_loss(tensor, *args, **kwargs):
            with contextlib.suppress(Exception):
                if tensor.numel() == 1 and not getattr(tensor, _SCALED, False):
                    watch._note_loss(tensor.detach())
            return backward(tensor, *args, **kwargs)

        backward_noting_loss.__doc__ = backward.__doc__
        torch.Tensor.backward = backward_noting_loss
        with contextlib.suppress(Exception):
            self._watch_scaler(torch)

    def _watch_scaler(self, torch) -> None:
        """``GradScaler.scale(loss)``: the loss the user computed is noted there, and the
        scaled tensor it returns (what ``backward`` then sees) is not."""
        from torch.amp.grad_scaler import GradScaler

        watch = self
        scale = GradScaler.scale

        def scale_noting_loss(scaler, outputs, *args, **kwargs):
            scaled = scale(scaler, outputs, *args, **kwargs)
            with contextlib.suppress(Exception):
                if isinstance(outputs, torch.Tensor) and outputs.numel() == 1:
                    watch._note_loss(outputs.detach())
                    if isinstance(scaled, torch.Tensor):
                        setattr(scaled, _SCALED, True)
            return scaled

        scale_noting_loss.__doc__ = scale.__doc__
        GradScaler.scale = scale_noting_loss

    # -- XLA502: moves that untie ----------------------------------------------------------------
    def _before_move(self, torch, module, args, kwargs):
        """(parameters by name, tied groups) before a move of ``module`` to the XLA
        device, or None when it is no such move."""
        try:
            device = torch._C._nn._parse_to(*args, **kwargs)[0]
            if device is None or device.type != "xla":
                return None
            named = list(module.named_parameters(remove_duplicate=False))
        except Exception:
            return None
        if all(p.device.type == "xla" for _, p in named):
            return None
        groups: dict[int, list[str]] = {}
        for name, parameter in named:
            groups.setdefault(id(parameter), []).append(name)
        old = {name: (id(p), p.device.type) for name, p in named}
        return old, [names for names in groups.values() if len(names) > 1], len(groups)

    def _after_move(self, module, before, caller) -> None:
        old, tied, count_before = before
        named = dict(module.named_parameters(remove_duplicate=False))
        for name, (old_id, old_device) in old.items():
            new = named.get(name)
            if new is not None and id(new) != old_id and old_device != "xla":
                self._left_behind.add(old_id)
        split = [names for names in tied if len({id(named[n]) for n in names if n in named}) > 1]
        if not split:
            return
        count_after = len({id(p) for p in named.values()})
        frame = self._user_frame(caller)
        shown = ", ".join(" and ".join(f"`{n}`" for n in names) for names in split[:3])
        message = (
            f"{shown} were one parameter before the move to the XLA device and are "
            f"{'two' if all(len(n) == 2 for n in split) else 'several'} after "
            f"({count_before} parameters before, {count_after} after): they train apart"
        )
        site = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        # Reported once training starts (or the script ends) and only if they are still
        # apart: `model.tie_weights()` right after the move joins them again.
        self._untied.append((weakref.ref(module), split, site, message))

    def _settle_untied(self) -> None:
        for module_ref, split, site, message in self._untied:
            module = module_ref()
            if module is not None:
                named = dict(module.named_parameters(remove_duplicate=False))
                if all(len({id(named[n]) for n in names if n in named}) == 1 for names in split):
                    continue
            self._add("XLA502", None, message, site=site)
        self._untied = []

    # -- XLA501: an optimizer stepping what a move left behind ----------------------------------
    def _on_step(self, optimizer, args, kwargs) -> None:
        if id(optimizer) in self._stepped:
            return
        self._stepped.add(id(optimizer))
        try:
            self._settle_untied()
            parameters = [p for group in optimizer.param_groups for p in group["params"]]
            stale = [p for p in parameters if id(p) in self._left_behind and p.device.type != "xla"]
            if not stale:
                return
            site = self._optimizer_sites.get(optimizer)
            frame = None if site is not None else self._user_frame(sys._getframe(1))
            without_grad = sum(p.grad is None for p in stale)
            self._add(
                "XLA501",
                frame,
                f"the optimizer steps {len(stale)} of its {len(parameters)} parameters on the CPU: a model's "
                f"parameters from before its move to the XLA device, which made new ones; {without_grad} of them "
                "have no gradient, so the model does not train",
                site=site,
            )
        except Exception:
            pass

    def _add(self, code: str, frame, message: str, site: tuple | None = None) -> None:
        if site is None:
            site = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        key = (code, *site)
        if key in self._reported:
            return
        self._reported.add(key)
        self.findings.append({"code": code, "file": site[0], "line": site[1], "message": message})

    # -- the loss ----------------------------------------------------------------------------------
    def _note_loss(self, loss) -> None:
        self._latest_loss = loss
        if loss.device.type != "xla":
            return
        self.backward_calls += 1
        if len(self._first_losses) < FIRST_LOSSES_KEPT:
            self._first_losses.append(loss)
        else:
            self._last_loss = loss

    def on_step_taken(self) -> None:
        """An optimizer step ended: its loss is the latest noted (None: none since)."""
        if len(self._step_losses) < STEP_LOSSES_KEPT:
            self._step_losses.append(self._latest_loss)

    def read_step_losses(self, xlac=None) -> None:
        """The per-step losses as numbers: a CPU tensor is read as it is; an XLA one only
        once a sync computed it (``xlac``: torch_xla's, before it shuts down), else None.
        Read once; later calls keep what the first read."""
        if not self._step_losses:
            return
        values: list[float | None] = []
        for loss in self._step_losses:
            value = None
            with contextlib.suppress(Exception):
                if loss is not None and loss.device.type != "xla":
                    value = float(loss)
                elif loss is not None and xlac is not None and _is_computed(xlac, loss):
                    value = float(loss.cpu())
            values.append(value)
        self._step_losses = []
        self.step_loss_values = values

    def read_losses(self, xlac) -> None:
        """Read the kept losses, before torch_xla shuts down: only those a sync already
        computed (their graph is a bare ``device_data``), so that this copies data and
        runs no graph of its own (none shows among the causes)."""
        kept = [*self._first_losses, *([self._last_loss] if self._last_loss is not None else [])]
        self._first_losses, self._last_loss = [], None
        with contextlib.suppress(Exception):
            computed = [t for t in kept if _is_computed(xlac, t)]
            if len(computed) >= 2:
                self.loss_values = [float(t.cpu()) for t in computed]

    def write(self, out_dir: str) -> None:
        with contextlib.suppress(Exception):
            self._settle_untied()
        with contextlib.suppress(Exception):
            self.read_step_losses()  # a process without torch_xla: CPU losses
        if not self.findings and self.loss_values is None and not self.step_loss_values:
            return
        record = {
            "findings": self.findings,
            "losses": {
                "backward_calls": self.backward_calls,
                "values": self.loss_values or [],
                "per_step": self.step_loss_values,
            },
        }
        path = os.path.join(out_dir, f"{RUNTIME_PREFIX}{os.getpid()}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as file:
            json.dump(record, file)
        os.replace(path + ".tmp", path)


def _is_computed(xlac, tensor) -> bool:
    """The tensor holds data on the device: its IR is one ``xla::device_data`` node."""
    nodes = [line for line in xlac._get_xla_tensors_text([tensor]).splitlines() if "=" in line]
    return len(nodes) == 1 and "device_data" in nodes[0]


WATCH = RuntimeWatch()
