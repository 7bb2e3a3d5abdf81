"""How a script reads a device value: as a device (``.to(device)``), as a string
(``device.startswith("cuda")``, ``"cuda" in device``), as autocast's ``device_type``, and
the device types it derives (``device_type = "cuda" if "cuda" in device else "cpu"``).

A ``torch.device`` is no string, so a port that writes ``torch_xla.device()`` where the
script reads a string breaks it; ``"xla"`` is both. The reads of a variable and of a
command-line option (``args.device``, see :mod:`xlalint.linter.options`) are answered
alike. Built on :class:`xlalint.linter.devices.DeviceAnalysis`, which knows scopes.
"""

from __future__ import annotations

import ast

from xlalint.linter.devices import (
    DEVICE_KEYWORDS,
    TORCH_DEVICE,
    DeviceAnalysis,
    condition_holding,
    inspects_device_string,
    is_cuda_string,
)
from xlalint.linter.options import CommandLineOption, CommandLineOptions
from xlalint.linter.semantic import Semantic, method_name, parent

# The autocast calls whose first argument is a `device_type`.
DEVICE_TYPE_CALLS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})


class DeviceReads:
    def __init__(self, semantic: Semantic, devices: DeviceAnalysis, options: CommandLineOptions):
        self.semantic = semantic
        self.devices = devices
        self.options = options

    def reads_of(self, name: ast.Name) -> list[ast.Name]:
        """The reads of the variable ``name`` binds, in its scope."""
        scope = self.devices.scope_of(name)
        return [
            node
            for node in self.semantic.names_with_id(name.id)
            if isinstance(node.ctx, ast.Load) and self.devices.scope_of(node) is scope
        ]

    def option_reads(self, option: CommandLineOption) -> list[ast.expr]:
        """Where the script reads the value of a command-line option: ``args.device``, and
        the reads of a variable that only copies it (``device = args.device``)."""
        reads: list[ast.expr] = []
        for read in self.options.reads(option):
            reads.append(read)
            holder = parent(read)
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
                copy = holder.targets[0]
                if all(self.options.read_by(value) is option for value in self.devices.values_of(copy)):
                    reads.extend(self.reads_of(copy))
        return reads

    def read_as_device(self, reads: list[ast.expr]) -> bool:
        """A read is given as a device: ``.to(device)``, ``device=device``, ``torch.device(device)``."""
        for node in reads:
            holder = parent(node)
            if isinstance(holder, ast.keyword) and holder.arg in DEVICE_KEYWORDS:
                return True
            first = isinstance(holder, ast.Call) and holder.args and holder.args[0] is node
            if first and (method_name(holder) == "to" or self.semantic.call_name(holder) in TORCH_DEVICE):
                return True
        return False

    def read_as_string(self, reads: list[ast.expr]) -> ast.expr | None:
        """The first read only a string allows, as written: ``device.startswith("cuda")``,
        ``device[:4]``, ``device + ":0"``, ``"cuda" in device`` (a ``torch.device`` has none)."""
        for node in reads:
            holder = parent(node)
            if isinstance(holder, (ast.Attribute, ast.Subscript, ast.BinOp)):
                call = parent(holder)
                return call if isinstance(call, ast.Call) and call.func is holder else holder
            if isinstance(holder, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in holder.ops):
                return holder
        return None

    def read_as_device_type(self, reads: list[ast.expr]) -> bool:
        """A read is autocast's ``device_type``, which must be a string."""
        for node in reads:
            holder = parent(node)
            if isinstance(holder, ast.keyword) and holder.arg == "device_type":
                return True
            if (
                isinstance(holder, ast.Call)
                and holder.args
                and holder.args[0] is node
                and self.semantic.call_name(holder) in DEVICE_TYPE_CALLS
            ):
                return True
        return False

    def derived_device_types(self, reads: list[ast.expr]) -> list[ast.IfExp]:
        """``device_type = "cuda" if "cuda" in device else "cpu"``: a device type derived
        from the device string (it feeds ``torch.autocast(device_type=...)``)."""
        found = []
        for read in reads:
            derivation = condition_holding(read)
            if not isinstance(derivation, ast.IfExp) or not inspects_device_string(derivation.test):
                continue
            if any(is_cuda_string(b) for b in (derivation.body, derivation.orelse)):
                found.append(derivation)
        return found
