"""``torch.cuda.is_available()`` (or ``torch.accelerator.is_available()``): it is False
on an XLA machine, so the ported script would take its path without an accelerator.
Where it chooses the device (``if torch.cuda.is_available(): model.cuda()``, or through
a flag: ``use_cuda = not args.no_cuda and torch.cuda.is_available()`` ... ``if
use_cuda:``) that is the CPU; elsewhere it skips what the script does on an accelerator
(``if torch.cuda.is_available(): torch.cuda.manual_seed(s)``, ``assert
torch.cuda.is_available()``), or picks float16 where bfloat16 is meant (``"bfloat16" if
torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"``: the
whole condition is about the accelerator, and an XLA device has bfloat16). Reported at
the call (the whole condition for the latter); the unsafe fix treats the XLA device as
available.
"""

from __future__ import annotations

import ast

from xlalint.analysis.devices import IS_AVAILABLE, condition_holding
from xlalint.analysis.semantic import ancestors, dotted_name, enclosing_statement, method_name, parent, string_value
from xlalint.analysis.syntax import is_alone_on_its_lines
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import Fix, RemoveStatement, ReplaceExpr
from xlalint.rules._cuda_api import CUDA_BACKENDS
from xlalint.rules.xla104.writer import Writer

# What an XLA device has that the CUDA checks ask about: a condition made only of these
# is True on XLA.
CAPABILITIES = IS_AVAILABLE | {"torch.cuda.is_bf16_supported"}
FALSE_ON_XLA = "is False on an XLA machine"
# What a branch may do and still change nothing on the device: say something.
_REPORTING_CALLS = frozenset({"warnings.warn", "torch_xla.core.xla_model.master_print"})
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})


class Availability:
    def __init__(self, writer: Writer):
        self.writer = writer
        self.ctx = writer.ctx
        self.devices = writer.devices
        # The calls seen in the walk, judged in `finish` (do they choose the device?).
        self.calls: list[ast.Call] = []

    def add(self, call: ast.Call) -> None:
        self.calls.append(call)

    def check(self) -> None:
        for call in self.calls:
            if id(call) in self.writer.claimed or self.ctx.semantic.call_name(call) not in IS_AVAILABLE:
                continue
            text = self.writer.short(call, 32)
            test_of = condition_holding(call)
            if isinstance(test_of, ast.If) and self.devices.decided_later(test_of) is not None:
                continue  # `device = xm.xla_device()` after it decides the device
            if test_of is not None and self.devices.chooses_device(test_of):
                self.writer.report(
                    call,
                    f"`{text}` chooses the device and {FALSE_ON_XLA}: the script would run on the CPU",
                    self._assume_available_fix(call),
                )
                continue
            if test_of is not None:
                self._report_elsewhere(call, text, test_of)
                continue
            flag = _flag_set_by(call)
            chooser = None
            if flag is not None:
                chooser = next((c for c in self._conditions_reading(flag) if self.devices.chooses_device(c)), None)
            if chooser is not None:
                self.writer.report(
                    call,
                    f"`{flag}`, from `{text}`, {FALSE_ON_XLA}: line {chooser.lineno} would choose the CPU",
                    self._assume_available_fix(call),
                )
                continue
            self._report_elsewhere(call, text, test_of)

    def _report_elsewhere(self, call: ast.Call, text: str, test_of: ast.If | ast.IfExp | None) -> None:
        """An availability test that chooses no device: what the script does on an
        accelerator (seed it, check for it) is what it must do on the XLA device."""
        stmt = parent(call)
        if isinstance(stmt, ast.Assert) and stmt.test is call and is_alone_on_its_lines(stmt):
            fix = self.writer.fix("unsafe", "Remove the assertion", RemoveStatement(self.ctx.span(stmt)))
            self.writer.report(call, f"`{text}` is asserted and {FALSE_ON_XLA}: the script would stop here", fix)
            return
        if test_of is not None and _chooses_a_backend(test_of):
            return  # `"nccl" if torch.cuda.is_available() else "gloo"`: the process group's finding
        if isinstance(test_of, ast.If) and self._only_reports(test_of):
            return  # `if not torch.cuda.is_available(): print("running on the CPU")`: nothing runs differently
        if test_of is not None:
            where = "this test takes the path without an accelerator"
        else:
            where = "this value says there is no accelerator"
        message = f"`{text}` {FALSE_ON_XLA}: {where}"
        self.writer.report(call, message, self._assume_available_fix(call))

    def _only_reports(self, test_of: ast.If) -> bool:
        """Both branches of the ``if`` (its ``elif``\\s too) only print, warn or log."""
        for stmt in [*test_of.body, *test_of.orelse]:
            if isinstance(stmt, ast.If):
                if not self._only_reports(stmt):
                    return False
            elif not (isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and self._reports(stmt.value))):
                return False
        return True

    def _reports(self, node: ast.expr) -> bool:
        """``print(...)``, ``warnings.warn(...)``, ``xm.master_print(...)``, ``logger.warning(...)``."""
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if self.ctx.semantic.call_name(node) in _REPORTING_CALLS or (isinstance(func, ast.Name) and func.id == "print"):
            return True
        receiver = (dotted_name(func.value) or "") if isinstance(func, ast.Attribute) else ""
        return method_name(node) in _LOG_METHODS and "log" in receiver.rsplit(".", 1)[-1].lower()

    def check_conditional(self, node: ast.IfExp) -> None:
        """``"bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else
        "float16"``: a choice made only on the accelerator's capabilities, all True on XLA."""
        if id(node) in self.writer.claimed:
            return
        test = node.test
        operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        names = [self.ctx.semantic.call_name(o) if isinstance(o, ast.Call) else None for o in operands]
        if not (all(n in CAPABILITIES for n in names) and any(n in IS_AVAILABLE for n in names)):
            return
        if _chooses_a_backend(node):
            return  # `"nccl" if torch.cuda.is_available() else "gloo"`: the process group's finding
        # The bfloat16 XLA computes in is the explanation's: the message names the choice.
        message = (
            f"`{self.writer.short(test)}` is False on XLA: the script would take `{self.writer.short(node.orelse, 20)}`"
        )
        fix = self.writer.fix(
            "unsafe",
            "Take the accelerator's branch",
            ReplaceExpr(self.ctx.span(node), "{body}", (("body", self.ctx.span(node.body)),)),
        )
        self.writer.report(test, message, fix)

    def _conditions_reading(self, flag: str) -> list[ast.If | ast.IfExp]:
        found = []
        for node in self.ctx.semantic.nodes_of(ast.If, ast.IfExp):
            if any(
                isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and dotted_name(n) == flag
                for n in ast.walk(node.test)
            ):
                found.append(node)
        return found

    def _assume_available_fix(self, call: ast.Call) -> Fix:
        """``not args.no_cuda and torch.cuda.is_available()`` -> ``not args.no_cuda``;
        ``a if torch.cuda.is_available() else b`` -> ``a``; anywhere else ``True``."""
        holder = parent(call)
        if not (isinstance(holder, ast.BoolOp) and isinstance(holder.op, ast.And)):
            return self.writer.fix("unsafe", "Treat the XLA device as available", self.writer.true(call))
        others = [v for v in holder.values if v is not call]
        pieces = []
        for index, value in enumerate(others):
            loose = isinstance(value, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr))
            pieces.append(f"({{v{index}}})" if loose else f"{{v{index}}}")
        parts = tuple((f"v{index}", self.ctx.span(value)) for index, value in enumerate(others))
        span, template = self.ctx.span(holder), " and ".join(pieces)
        return self.writer.fix("unsafe", "Treat the XLA device as available", ReplaceExpr(span, template, parts))


def _chooses_a_backend(condition: ast.If | ast.IfExp) -> bool:
    """``"nccl" if torch.cuda.is_available() else "gloo"``: reported, and fixed, where the
    backend is passed to ``init_process_group``."""
    if not isinstance(condition, ast.IfExp):
        return False
    return any((string_value(b) or "").lower() in CUDA_BACKENDS for b in (condition.body, condition.orelse))


def _flag_set_by(call: ast.Call) -> str | None:
    """``use_cuda`` / ``args.cuda`` for ``<flag> = <a boolean built on call>``."""
    stmt = enclosing_statement(call)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target = stmt.target
    else:
        return None
    # Only through `and`/`or`/`not`: a flag, not a value passed on or compared.
    for holder in ancestors(call):
        if holder is stmt:
            break
        if not isinstance(holder, (ast.BoolOp, ast.UnaryOp)):
            return None
    return dotted_name(target)


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID: list[Valid] = []
INVALID = [
    # Today's pytorch/examples: `torch.accelerator` is not the XLA device, and the flag
    # built on `is_available()` (False on an XLA machine) chooses the device.
    Invalid(
        """
        import torch
        use_accel = not args.no_accel and torch.accelerator.is_available()
        if use_accel:
            device = torch.accelerator.current_accelerator()
        else:
            device = torch.device("cpu")
        """,
        fixed="""
        import torch
        import torch_xla

        use_accel = not args.no_accel and torch.accelerator.is_available()
        if use_accel:
            device = torch_xla.device()
        else:
            device = torch.device("cpu")
        """,
        unsafe_fixed="""
        import torch
        import torch_xla

        use_accel = not args.no_accel
        if use_accel:
            device = torch_xla.device()
        else:
            device = torch.device("cpu")
        """,
        count=2,
    ),
    # The older examples: the flag is an attribute; a direct test is the same thing.
    Invalid(
        """
        import torch
        args.cuda = not args.no_cuda and torch.cuda.is_available()
        if args.cuda:
            model.cuda()
        if torch.cuda.is_available():
            batch = batch.to(args.device)
        """,
        fixed="""
        import torch
        import torch_xla

        args.cuda = not args.no_cuda and torch.cuda.is_available()
        if args.cuda:
            model.to(torch_xla.device())
        if torch.cuda.is_available():
            batch = batch.to(args.device)
        """,
        unsafe_fixed="""
        import torch
        import torch_xla

        args.cuda = not args.no_cuda
        if args.cuda:
            model.to(torch_xla.device())
        if True:
            batch = batch.to(args.device)
        """,
        count=3,
    ),
    # Outside a device choice: what the script does on an accelerator must happen on XLA.
    Invalid(
        """
        import torch
        assert torch.cuda.is_available(), "needs a GPU"
        if torch.cuda.is_available():
            torch.manual_seed(0)
        dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
        pin = torch.cuda.is_available()
        """,
        unsafe_fixed="""
        import torch
        if True:
            torch.manual_seed(0)
        dtype = "bfloat16"
        pin = True
        """,
        count=4,
    ),
    # A later unconditional XLA device decides the device (the CUDA one is still ported).
    Invalid(
        """
        import torch
        import torch_xla.core.xla_model as xm
        if torch.cuda.is_available():
            device = torch.device("cuda")
        device = xm.xla_device()
        """,
        fixed="""
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm

        if torch.cuda.is_available():
            device = torch_xla.device()
        device = xm.xla_device()
        """,
        count=1,
    ),
]
