"""Device strings and device arguments: ``torch.device("cuda")``, ``.to("cuda:0")``,
``device="cuda"`` to any call, a parameter default ``def f(device="cuda")``, the
``"cuda" if torch.cuda.is_available() else "cpu"`` selection, an int given as a device,
``.cuda()``, ``map_location=``, a variable assigned a CUDA device and used as one, and a
command-line option's CUDA default (``add_argument("--device", default="cuda")``).

Each becomes the XLA device (``map_location``: ``"cpu"``, load on the host then move).
A variable's CUDA string is reported where it is written, once the variable is seen used
as a device. Where the value is also read as a string (``"cuda" in device``,
``args.device.startswith("cuda")``), and for every option default, the fix writes
``"xla"``, both a device and a string, and ports the device type derived from it.
"""

from __future__ import annotations

import ast

from xlalint.analysis.devices import (
    DEVICE_KEYWORDS,
    TORCH_DEVICE,
    is_cuda_storage_lambda,
    is_cuda_string,
    is_device_index,
)
from xlalint.analysis.options import ADD_ARGUMENT
from xlalint.analysis.semantic import keyword, method_name, parent, string_value
from xlalint.analysis.syntax import argument, has_star_args
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import Fix, Operation, ReplaceExpr, Span
from xlalint.rules.xla104.writer import Writer

# ...and the one whose CUDA value is replaced by "cpu": load on the host, then move.
MAP_LOCATION = "map_location"
# `.cuda(device=None, non_blocking=False, memory_format=...)`: what survives in `.to()`.
CUDA_METHOD_PARAMS = ("device", "non_blocking", "memory_format")
KEPT_CUDA_METHOD_ARGS = ("non_blocking", "memory_format")
# Random number generators: on the CPU whatever the device of the tensors.
GENERATORS = frozenset({"torch.Generator", "torch._C.Generator"})


class DeviceArguments:
    def __init__(self, writer: Writer):
        self.writer = writer
        self.ctx = writer.ctx
        self.devices = writer.devices
        # Variables used as a device (`x.to(device)`), and whether as `map_location`:
        # judged in `finish`, once every assignment has been seen.
        self.variable_uses: list[tuple[ast.Name, bool]] = []

    # -- expressions ------------------------------------------------------------------------
    def check_selection(self, node: ast.IfExp) -> None:
        if not self.devices.is_device_selection(node):
            return
        holder = parent(node)
        target = holder.targets[0] if isinstance(holder, ast.Assign) and len(holder.targets) == 1 else None
        if isinstance(target, ast.Name):
            reads = self.writer.reads.reads_of(target)
            if self.writer.reads.read_as_string(reads) or self.writer.reads.read_as_device_type(reads):
                # `device = "cuda" if ... else "cpu"` ... `"cuda" in device`: both sides go
                # to "xla", a device and a string, and what is derived from it follows.
                message = f"CUDA device selection in `{target.id}`, read as a string too" + self._kept_tests(reads)
                self.writer.report_device(node, message, as_string=self._derived_types(reads))
                return
        self.writer.report_device(node, "CUDA device selection")

    def check_defaults(self, node: ast.arguments) -> None:
        """``def f(device="cuda")``: a parameter default that is a CUDA device."""
        positional = [*node.posonlyargs, *node.args]
        pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults))
        pairs += [(arg, default) for arg, default in zip(node.kwonlyargs, node.kw_defaults) if default is not None]
        for arg, default in pairs:
            if arg.arg == "device" and (is_cuda_string(default) or self.devices.is_device_selection(default)):
                self.writer.report_device(default, f"CUDA device as the default of `{arg.arg}`")

    def check_torch_device(self, call: ast.Call) -> None:
        if self.devices.torch_device_is_cuda(call):
            # `device = torch.device("cuda")` ... `if device.type == "cuda":` tests "xla".
            holder = parent(call)
            target = holder.targets[0] if isinstance(holder, ast.Assign) and len(holder.targets) == 1 else None
            reads = self.writer.reads.reads_of(target) if isinstance(target, ast.Name) else []
            also = tuple(
                ReplaceExpr(self.ctx.span(node), self.writer.quoted_xla(node))
                for node in self.writer.reads.ported_type_tests(reads)
            )
            self.writer.report_device(call, "`torch.device` of a CUDA device", also=also)
        elif isinstance(kind := argument(call, 0, "type"), ast.Name):
            self.variable_uses.append((kind, False))

    def check_generator(self, call: ast.Call) -> bool:
        """``torch.Generator(device=<cuda or XLA device>)``: an XLA device raises ("XLA
        device type not an accelerator"), so the XLA device is no port of a CUDA one here:
        generators stay on the CPU. True when the device argument is reported."""
        device = argument(call, 0, "device")
        if device is None or id(device) in self.writer.claimed:
            return False
        if isinstance(device, ast.Name) and not self.devices.cuda_values(device):
            on_accelerator = self.devices.names_xla_device(device)
        else:
            on_accelerator = (
                is_cuda_string(device)
                or is_device_index(device)
                or self.devices.is_cuda_device(device)
                or self.devices.names_xla_device(device)
                or isinstance(device, ast.Name)
            )
        if not on_accelerator:
            return False
        message = (
            f"`torch.Generator(device={self.writer.short(device, 30)})` raises on an XLA device: keep it on the CPU"
        )
        self._report_cpu(device, message, "unsafe", 'Keep the generator on the CPU: `device="cpu"`')
        return True

    def check_option_default(self, call: ast.Call) -> None:
        """``parser.add_argument("--device", default="cuda" if ... else "cpu")``: the script
        reads the option (``args.device``) as the command line gives it, a string, and the
        default is evaluated at import time. ``"xla"`` is both a device and a string, and
        creates no runtime; a device type derived from the string follows."""
        default = keyword(call, "default")
        option = self.writer.options.declaring(default.value) if default is not None else None
        if option is None or option.default is None:
            return
        reads = self.writer.reads.option_reads(option)
        if self.devices.is_device_selection(option.default):
            what = "CUDA device selection"
        elif is_cuda_string(option.default) and (
            self.writer.reads.read_as_device(reads) or self.writer.reads.read_as_device_type(reads)
        ):
            what = f"CUDA device `{self.writer.short(option.default, 30)}`"
        else:
            return
        flag = next((v for v in (string_value(a) for a in call.args) if v), option.destination)
        message = f"{what} as the default of `{flag}`" + self._kept_tests(reads)
        if (string_read := self.writer.reads.read_as_string(reads)) is not None:
            message += f", read as a string (`{self.writer.short(string_read, 30)}`)"
        self.writer.report_device(
            option.default,
            message,
            as_string=(*self._derived_types(reads), *self.writer.xla_choice(call, is_cuda_string)),
        )
        for read in reads:
            holder = parent(read)
            if isinstance(holder, ast.keyword) and holder.arg == MAP_LOCATION:
                self._report_map_location(read)

    def check_arguments(self, call: ast.Call) -> None:
        """``.to(<cuda>)``, ``device=<cuda>``, ``map_location=<cuda>`` in any call."""
        if method_name(call) == ADD_ARGUMENT:
            self.check_option_default(call)
            return
        if self.ctx.semantic.call_name(call) in GENERATORS and self.check_generator(call):
            return
        values: list[tuple[ast.AST, bool]] = []
        if method_name(call) == "to" and call.args:
            values.append((call.args[0], False))
        for kw in call.keywords:
            if kw.arg in DEVICE_KEYWORDS:
                values.append((kw.value, False))
            elif kw.arg == MAP_LOCATION:
                values.append((kw.value, True))
        for value, is_map_location in values:
            if not is_map_location and self.devices.holds_device_index(value):
                # `model.to(local_rank)`: reported where it is used, since the variable is
                # the process's rank too (the fix replaces this use only).
                self.writer.report_device(
                    value, f"device `{self.writer.short(value)}` is an int, which torch reads as a CUDA device index"
                )
                continue
            if isinstance(value, ast.Name):
                self.variable_uses.append((value, is_map_location))
                continue
            if isinstance(value, ast.Call) and self.ctx.semantic.call_name(value) in TORCH_DEVICE:
                # Reported by `check_torch_device` when its turn comes (children
                # are visited after their parent).
                if is_map_location:
                    self.writer.map_locations.add(id(value))
                continue
            if is_map_location and is_cuda_storage_lambda(value):
                self.writer.report_device(value, "`map_location` moves storages to CUDA", to_cpu=True)
            elif is_cuda_string(value) or is_device_index(value) or self.devices.is_device_selection(value):
                where = "`map_location`" if is_map_location else "a device argument"
                self.writer.report_device(value, f"CUDA device as {where}", to_cpu=is_map_location)

    # -- `.cuda()` ----------------------------------------------------------------------------
    def check_cuda_method(self, call: ast.Call) -> None:
        receiver = call.func.value  # type: ignore[attr-defined]
        device, _ = self.writer.xla_device(call)
        self.writer.report(
            call,
            f"`.cuda()` moves to a CUDA device: use `.to({device})`",
            self._cuda_method_fix(call, receiver),
            keep=receiver,
        )

    def _cuda_method_fix(self, call: ast.Call, receiver: ast.AST) -> Fix | None:
        if has_star_args(call) or len(call.args) > 2 or any(kw.arg not in CUDA_METHOD_PARAMS for kw in call.keywords):
            return None
        device, imports = self.writer.xla_device(call)
        # The receiver's source (parentheses included) is kept as it is.
        arguments = [device]
        parts: list[tuple[str, Span]] = [("receiver", self.ctx.span(receiver))]
        for position, name in enumerate(CUDA_METHOD_PARAMS):
            value = argument(call, position, name)
            if value is not None and name in KEPT_CUDA_METHOD_ARGS:
                arguments.append(f"{name}={{{name}}}")
                parts.append((name, self.ctx.span(value)))
        template = "{receiver}.to(" + ", ".join(arguments) + ")"
        return self.writer.fix(
            "safe", f"Use `.to({device})`", ReplaceExpr(self.ctx.span(call), template, tuple(parts)), imports=imports
        )

    # -- devices held in variables --------------------------------------------------------------
    def check_variables(self) -> None:
        """``device = "cuda"`` used as a device (``x.to(device)``) is reported at the
        string; ``map_location=device`` of a CUDA ``device`` is reported at the name:
        once the device is ``torch_xla.device()``, ``torch.load`` cannot map onto it."""
        used_as_device: dict[tuple[int, str], ast.Name] = {}
        for name, is_map_location in self.variable_uses:
            if not self.devices.cuda_values(name):
                continue
            if is_map_location:
                self._report_map_location(name)
            else:
                used_as_device.setdefault((id(self.devices.scope_of(name)), name.id), name)
        for name in used_as_device.values():
            reads = self.writer.reads.reads_of(name)
            for value in self.devices.cuda_values(name):
                # A string: `"cuda:0"`, `f"cuda:{rank}"` (a `torch.device` or a selection
                # is reported where it is written).
                if is_cuda_string(value):
                    message = f"CUDA device `{self.writer.short(value, 24)}` in `{name.id}`"
                    if self.writer.reads.read_as_string(reads):
                        # `"cuda" in device`, `device.startswith(...)`: a torch.device is no
                        # str, "xla" is both; a device type derived from it follows.
                        self.writer.report_device(
                            value,
                            message + ", read as a string too" + self._kept_tests(reads),
                            as_string=self._derived_types(reads),
                        )
                    elif self.writer.reads.read_as_device_type(reads):
                        # `torch.autocast(device_type=device)` needs a str: "xla" is both.
                        self.writer.report_device(
                            value, message + ", used as a `device_type` too", as_string=self._derived_types(reads)
                        )
                    else:
                        self.writer.report_device(value, message + ", used as a device")

    def _report_map_location(self, node: ast.expr) -> None:
        """``map_location=device`` of a CUDA device: once the device is the XLA device,
        ``torch.load`` cannot map onto it ("don't know how to restore data location")."""
        message = (
            f"`map_location={self.writer.short(node, 30)}` is the XLA device once ported, "
            "which `torch.load` cannot map onto: load onto the CPU"
        )
        self._report_cpu(node, message, "safe", 'Load onto the CPU: `map_location="cpu"`')

    def _report_cpu(self, node: ast.expr, message: str, applicability: str, title: str) -> None:
        """Report a device that has to stay the CPU on XLA, fixed by writing ``"cpu"``."""
        fix = self.writer.fix(applicability, title, ReplaceExpr(self.ctx.span(node), '"cpu"'))
        self.writer.report(node, message, fix)

    def _derived_types(self, reads: list[ast.expr]) -> tuple[Operation, ...]:
        """``device_type = "cuda" if "cuda" in device else "cpu"``: with the device "xla" it
        would say "cpu", and autocast would silently run on the CPU; ``if device_type ==
        "cuda":`` would never run its branch (the ``synchronize()`` the port made
        ``torch_xla.sync()`` and ``xm.wait_device_ops()``). The CUDA strings of the derivation and of the tests
        become "xla" too, but for a test guarding code only CUDA runs (``pin_memory()``)."""
        return tuple(
            ReplaceExpr(self.ctx.span(node), self.writer.quoted_xla(node))
            for node in self.writer.reads.ported_tests(reads)
        )

    def _kept_tests(self, reads: list[ast.expr]) -> str:
        """The message's note on the tests the fix leaves, false on XLA."""
        kept = self.writer.reads.kept_tests(reads)
        if not kept:
            return ""
        # Why they stay (they lead to what needs CUDA: `pin_memory()`, `fused=True`) is the
        # explanation's; the message names the lines, at most three.
        lines = sorted({test.lineno for test in kept})
        if len(lines) == 1:
            return f' (line {lines[0]} still tests "cuda")'
        shown = ", ".join(map(str, lines[:3])) + (", ..." if len(lines) > 3 else "")
        return f' (lines {shown} still test "cuda")'


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID = [
    # An option defaulting to "cuda" that is never given as a device (a framework's
    # accelerator name, where "xla" would be no answer), and a CPU default.
    Valid(
        """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--accelerator", default="cuda")
        parser.add_argument("--device", default="cpu")
        args = parser.parse_args()
        trainer = Trainer(accelerator=args.accelerator)
        model = Net().to(args.device)
        """
    ),
]
INVALID = [
    # A device held in a variable is reported where the variable is assigned;
    # `map_location` of such a device loads onto the CPU instead.
    Invalid(
        """
        import torch
        device = "cuda"
        model = Net().to(device)
        state = torch.load("ckpt.pt", map_location=device)
        """,
        fixed="""
        import torch
        import torch_xla

        device = torch_xla.device()
        model = Net().to(device)
        state = torch.load("ckpt.pt", map_location="cpu")
        """,
        count=2,
    ),
    # Read as a string too: "xla" is both a device and a string.
    Invalid(
        """
        import torch
        device = "cuda:0"
        x = torch.ones(2, device=device)
        if "cuda" in device:
            pass
        """,
        fixed="""
        import torch
        import torch_xla

        device = "xla"
        x = torch.ones(2, device=device)
        if "xla" in device:
            pass
        """,
        count=1,
    ),
    # A test against "cuda" follows the value (issue 21, build-nanogpt's step timing): the
    # branch taken on CUDA is taken on XLA, with its CUDA call ported; a branch left empty
    # by a removed call goes with it; a test that holds on the CPU only stays.
    Invalid(
        """
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        device_type = "cuda" if device.startswith("cuda") else "cpu"
        x = torch.ones(2, device=device)
        if device_type == "cuda":
            torch.cuda.synchronize()
        if device != "cuda":
            print("on the host")
        else:
            torch.cuda.empty_cache()
        if device_type == "cpu":
            print("on the CPU")
        match device:
            case "cuda" | "cuda:0":
                print("on the GPU")
        """,
        fixed="""
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm

        device = "xla"
        device_type = "xla" if device.startswith("xla") else "cpu"
        x = torch.ones(2, device=device)
        if device_type == "xla":
            torch_xla.sync()
            xm.wait_device_ops()
        if device != "xla":
            print("on the host")
        if device_type == "cpu":
            print("on the CPU")
        match device:
            case "xla" | "xla":
                print("on the GPU")
        """,
        count=3,
    ),
    # A device object's type is tested the same way: on XLA it is "xla".
    Invalid(
        """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net().to(device)
        device_type = device.type
        if device.type == "cuda" or device_type == "cuda":
            print("on the GPU")
        """,
        fixed="""
        import torch
        import torch_xla

        device = torch_xla.device()
        model = Net().to(device)
        device_type = device.type
        if device.type == "xla" or device_type == "xla":
            print("on the GPU")
        """,
        count=1,
    ),
    # nanoGPT's batch loader pins memory on CUDA, which XLA cannot: that test stays (false
    # on XLA, the other branch moves the batch), and the message says so.
    Invalid(
        """
        import torch
        device = "cuda"
        device_type = "cuda" if "cuda" in device else "cpu"
        def get_batch(x):
            if device_type == "cuda":
                return x.pin_memory().to(device, non_blocking=True)
            return x.to(device)
        """,
        fixed="""
        import torch
        import torch_xla

        device = "xla"
        device_type = "xla" if "xla" in device else "cpu"
        def get_batch(x):
            if device_type == "cuda":
                return x.pin_memory().to(device, non_blocking=True)
            return x.to(device)
        """,
        count=1,
    ),
    # A device chosen on the command line (issue 21): the script reads `args.device` as a
    # string, and the default runs at import time. "xla" is a device and a string and
    # creates no runtime; the device type derived from it and the choices follow.
    Invalid(
        """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
        args = parser.parse_args()
        device_type = "cuda" if "cuda" in args.device else "cpu"
        model = Net().to(args.device)
        ctx = torch.autocast(device_type=device_type, dtype=torch.bfloat16)
        state = torch.load("ckpt.pt", map_location=args.device)
        """,
        fixed="""
        import argparse
        import torch
        import torch_xla

        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="xla", choices=["cuda", "cpu", "xla"])
        args = parser.parse_args()
        device_type = "xla" if "xla" in args.device else "cpu"
        model = Net().to(args.device)
        ctx = torch.autocast(device_type=device_type, dtype=torch.bfloat16)
        state = torch.load("ckpt.pt", map_location="cpu")
        """,
        count=2,
    ),
    # A plain "cuda" default given to autocast as its device type.
    Invalid(
        """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--amp-device", default="cuda")
        args = parser.parse_args()
        ctx = torch.autocast(args.amp_device, dtype=torch.bfloat16)
        """,
        fixed="""
        import argparse
        import torch
        import torch_xla

        parser = argparse.ArgumentParser()
        parser.add_argument("--amp-device", default="xla")
        args = parser.parse_args()
        ctx = torch.autocast(args.amp_device, dtype=torch.bfloat16)
        """,
        count=1,
    ),
    # A plain "cuda" default, copied into a variable that is given as a device.
    Invalid(
        """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", type=str, default='cuda:0')
        opt, _ = parser.parse_known_args()
        def main(opt):
            device = opt.device
            model = Net().to(device)
            if device.startswith("cuda"):
                torch.backends.cudnn.benchmark = True
        """,
        fixed="""
        import argparse
        import torch
        import torch_xla

        parser = argparse.ArgumentParser()
        parser.add_argument("--device", type=str, default="xla")
        opt, _ = parser.parse_known_args()
        def main(opt):
            device = opt.device
            model = Net().to(device)
            if device.startswith("xla"):
                torch.backends.cudnn.benchmark = True
        """,
        count=1,
    ),
    # A selection read as a string (nanoGPT's way): "xla" on both sides, and the
    # device type derived from it follows, so autocast runs on XLA, not the CPU.
    Invalid(
        """
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
        device_type = "cuda" if "cuda" in device else "cpu"
        model = Net().to(device)
        ctx = torch.autocast(device_type=device_type, dtype=torch.bfloat16)
        """,
        fixed="""
        import torch
        import torch_xla

        device = "xla"
        device_type = "xla" if "xla" in device else "cpu"
        model = Net().to(device)
        ctx = torch.autocast(device_type=device_type, dtype=torch.bfloat16)
        """,
        count=1,
    ),
    # A device object as an option's default is built with the parser, at import: the
    # XLA device by name, which creates no runtime.
    Invalid(
        """
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default=torch.device("cuda"))
        """,
        fixed="""
        import argparse
        import torch
        import torch_xla

        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default=torch.device("xla"))
        """,
        count=1,
    ),
    # The function holds the XLA device already: the fix reuses its variable.
    Invalid(
        """
        import torch_xla
        def train(model):
            device = torch_xla.device()
            return model.cuda()
        """,
        fixed="""
        import torch_xla
        def train(model):
            device = torch_xla.device()
            return model.to(device)
        """,
    ),
    # A generator stays on the CPU: on an XLA device it raises.
    Invalid(
        """
        import torch
        import torch_xla
        g = torch.Generator(device="cuda")
        h = torch.Generator(device=torch_xla.device())
        """,
        unsafe_fixed="""
        import torch
        import torch_xla
        g = torch.Generator(device="cpu")
        h = torch.Generator(device="cpu")
        """,
        count=2,
    ),
]
