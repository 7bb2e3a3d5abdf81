"""``torch.cuda.is_available()`` (or ``torch.accelerator.is_available()``) where it
chooses the device: it is False on an XLA machine, so the ported script would take the
CPU path. Directly (``if torch.cuda.is_available(): model.cuda()``) or through a flag
(``use_cuda = not args.no_cuda and torch.cuda.is_available()`` ... ``if use_cuda:``).
Reported at the call; the unsafe fix treats the XLA device as available.
"""

from __future__ import annotations

import ast

from xlalint.linter.devices import IS_AVAILABLE, condition_holding
from xlalint.linter.model import Fix, ReplaceExpr
from xlalint.linter.rule import Invalid, Valid
from xlalint.linter.semantic import ancestors, dotted_name, enclosing_statement, parent
from xlalint.rules.xla104.writer import Writer


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
            text = self.writer.short(call)
            test_of = condition_holding(call)
            if test_of is not None:
                if self.devices.chooses_device(test_of):
                    self.writer.report(
                        call,
                        f"`{text}` chooses the device: it is False on an XLA machine, so the script "
                        "would run on the CPU",
                        self._assume_available_fix(call),
                    )
                continue
            flag = _flag_set_by(call)
            if flag is None:
                continue
            chooser = next((c for c in self._conditions_reading(flag) if self.devices.chooses_device(c)), None)
            if chooser is not None:
                self.writer.report(
                    call,
                    f"`{flag}` is computed from `{text}` and chooses the device (line {chooser.lineno}): "
                    "it is False on an XLA machine, so the script would run on the CPU",
                    self._assume_available_fix(call),
                )

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
]
