"""Shapes of the tensors the user's code moves to the XLA device, by site (stdlib only;
runs inside the user's processes as ``_xlalint_transfers``; see ``bootstrap.py``):
``transfers-<pid>.json``, read by ``shapes.py``."""

from __future__ import annotations

import sys

try:  # in the child, from the hook folder; in xlalint (tests), from the package
    import _xlalint_child_common as common
except ImportError:
    from xlalint.harness import child_common as common

#: ``transfers-<pid>.json``: the shapes each process moved, by site in the user's code.
TRANSFERS_PREFIX = "transfers-"
#: The module whose device loaders hand batches to the user's loop.
LOADER_MODULE = "torch_xla.distributed.parallel_loader"
#: Run-length entries kept per site: enough to show how shapes changed, bounded memory.
MAX_SHAPE_RUNS = 256
#: Transfers at one site within one step are told apart by their order (the k-th
#: ``v.to(device)`` of a dict comprehension); past this many they are not recorded.
MAX_SLOTS_PER_SITE = 16


class TransferLog:
    """Shapes moved to the XLA device, per site and step.

    A site is a place in the user's code (file, line, column of the call) and a slot:
    the k-th transfer there since the last ``torch_xla.sync`` (so a loop over a
    batch's tensors gives one sequence per tensor), and for a device loader the
    position of the tensor in the batch. Each site keeps its shapes run-length
    encoded: ``[[shape, times], ...]``.
    """

    def __init__(self) -> None:
        self.sites: dict[tuple, list[list]] = {}
        self._slots: dict[tuple, list[int]] = {}  # site -> [step, transfers this step]
        self.step = 0
        self.step_of = None  # reads the number of syncs so far, once torch_xla is imported
        self._columns: dict[tuple, int | None] = {}

    def record(self, kind: str, frame, path: list, shape: list[int]) -> None:
        if self.step_of is not None:
            self.step = self.step_of()
        code = frame.f_code
        place = (kind, code.co_filename, frame.f_lineno, self._column(code, frame.f_lasti))
        seen = self._slots.get(place)
        if seen is None or seen[0] != self.step:
            seen = self._slots[place] = [self.step, 0]
        slot = seen[1]
        seen[1] += 1
        if slot >= MAX_SLOTS_PER_SITE:
            # Not recorded: one slot for all the rest would mix different tensors
            # (the parameters of `model.to(device)`) into a false "change".
            return
        runs = self.sites.setdefault((*place, slot, tuple(path)), [])
        if runs and runs[-1][0] == shape:
            runs[-1][1] += 1
        elif len(runs) < MAX_SHAPE_RUNS:
            runs.append([shape, 1])

    def _column(self, code, lasti: int) -> int | None:
        """Start column of the expression running at ``lasti`` (Python 3.11+)."""
        key = (code, lasti)
        if key not in self._columns:
            column = None
            positions = getattr(code, "co_positions", None)
            if positions is not None:
                for index, position in enumerate(positions()):
                    if index == lasti // 2:
                        column = position[2]
                        break
            self._columns[key] = column
        return self._columns[key]

    def to_json(self) -> dict:
        return {
            "sites": [
                {"kind": kind, "file": file, "line": line, "col": col, "slot": slot, "path": list(path), "runs": runs}
                for (kind, file, line, col, slot, path), runs in self.sites.items()
            ]
        }


TRANSFERS = TransferLog()


def tensor_shapes(value, path: list, depth: int = 0):
    """(path, shape) of each tensor in a batch: nested tuples, lists and dicts."""
    if depth > 4:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from tensor_shapes(item, [*path, str(key)], depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value[:64]):
            yield from tensor_shapes(item, [*path, index], depth + 1)
    elif hasattr(value, "shape") and hasattr(value, "device"):
        yield path, list(value.shape)


def hook_tensor_to(torch_xla_module) -> None:
    """Record ``tensor.to(xla_device)`` calls, at the user's line that made them.

    A call from library code (an HF ``Trainer`` preparing a batch) is recorded at the
    innermost user frame that led to it, as "library"; ``model.to(device)`` moves each
    parameter once, in its own slot, so those never count as a change.
    """
    import torch

    original_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        moved = original_to(self, *args, **kwargs)
        try:
            if moved is not self and moved.device.type == "xla" and self.device.type != "xla":
                caller = sys._getframe(1)
                frame, depth = caller, 0
                while frame is not None and common.user_frame(frame) is None and depth < common.MAX_FRAMES_UP:
                    frame, depth = frame.f_back, depth + 1
                if frame is not None and common.user_frame(frame) is not None:
                    TRANSFERS.record("to" if frame is caller else "library", frame, [], list(moved.shape))
        except Exception:
            pass
        return moved

    to.__doc__ = original_to.__doc__
    torch.Tensor.to = to

    # Steps end at torch_xla.sync (xm.mark_step, xm.optimizer_step(barrier=True) and
    # the device loaders call it), which counts them. Read, not wrapped: torch_xla
    # tells a sync from other causes by the Python frames that call its step marker.
    counter_value = torch_xla_module._XLAC._xla_counter_value
    TRANSFERS.step_of = lambda: counter_value("MarkStep") or 0


def hook_device_loader(loader_module) -> None:
    """Record the tensors a ``MpDeviceLoader``/``ParallelLoader`` hands to the user's loop."""
    per_device = loader_module.PerDeviceLoader
    original_next = per_device.next

    def next_batch(self):
        batch = original_next(self)
        try:
            frame = sys._getframe(1)
            while frame is not None and common.user_frame(frame) is None:
                frame = frame.f_back
            if frame is not None:
                for path, shape in tensor_shapes(batch, []):
                    TRANSFERS.record("loader", frame, path, shape)
        except Exception:
            pass
        return batch

    per_device.next = next_batch
