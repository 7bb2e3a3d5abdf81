"""CUDA tensor types: ``torch.cuda.FloatTensor`` and its kin (``LongTensor``,
``HalfTensor``, ``ByteTensor``, ...), used as constructors or given to ``.type(T)``.

Without CUDA each raises ("Found no NVIDIA driver"), and on an XLA machine there is no
CUDA. The port builds the CPU type and moves it to the device: ``torch.cuda.FloatTensor(x)``
-> ``torch.FloatTensor(x).to(torch_xla.device())``; ``t.type(torch.cuda.FloatTensor)`` ->
``t.to(torch_xla.device(), torch.float32)``.

The GAN scripts choose the type by a flag: ``Tensor = torch.cuda.FloatTensor if cuda else
torch.FloatTensor``, then ``Tensor(np.random.random(...))`` and ``imgs.type(Tensor)``.
That choice is ported with its value: the CPU type, and every use of ``Tensor`` moved to
the device. It is right only where the test is True on every path once ported, so it is
part of the fix of the test (``torch.cuda.is_available()`` there, or the flag's
definition, see ``availability``), never a fix of its own next to a flag left False.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import method_name, parent
from xlalint.analysis.syntax import has_star_args
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import Fix, Import, Operation, ReplaceExpr, Span
from xlalint.rules.xla104.writer import Writer

# The dtype of each tensor type (`torch.FloatTensor` is float32 on every device).
DTYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64",
    "IntTensor": "int32",
    "ShortTensor": "int16",
    "CharTensor": "int8",
    "ByteTensor": "uint8",
    "BoolTensor": "bool",
}
CUDA_TYPES = {f"torch.cuda.{kind}": kind for kind in DTYPES}
CPU_TYPES = {f"torch.{kind}": kind for kind in DTYPES}
MESSAGE = "`torch.cuda.{kind}` is a CUDA tensor type"
# Builtins that only compare against a type: no CUDA is needed to ask.
TYPE_TESTS = frozenset({"isinstance", "issubclass"})


class TensorTypes:
    def __init__(self, writer: Writer):
        self.writer = writer
        self.ctx = writer.ctx

    def kind_of(self, node: ast.AST) -> str | None:
        """``"FloatTensor"`` for ``torch.cuda.FloatTensor`` (any spelling of it)."""
        last = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if last not in DTYPES:
            return None
        return CUDA_TYPES.get(self.ctx.semantic.qualified_name(node) or "")

    def check_reference(self, node: ast.Attribute | ast.Name) -> None:
        """A CUDA tensor type: called, given to ``.type()``, or chosen by a test."""
        kind = self.kind_of(node)
        if kind is None:
            return
        holder = parent(node)
        if isinstance(holder, (ast.Set, ast.List, ast.Compare)):
            # `{torch.Tensor, torch.cuda.FloatTensor}`, `type(t) == torch.cuda.FloatTensor`:
            # the type object asked about, which exists without CUDA; only building raises.
            return
        if isinstance(holder, ast.Tuple):
            holder = parent(holder)
        if isinstance(holder, ast.Call) and isinstance(holder.func, ast.Name) and holder.func.id in TYPE_TESTS:
            return  # `isinstance(t, torch.cuda.FloatTensor)`: a test, False on XLA, that runs
        message = MESSAGE.format(kind=kind)
        if isinstance(holder, ast.Call) and holder.func is node:
            self.writer.report(
                holder, f"{message}: build the CPU type and move it to the device", self._construct(holder, kind)
            )
        elif isinstance(holder, ast.Call) and method_name(holder) == "type" and holder.args and holder.args[0] is node:
            self.writer.report(
                node, f"{message}: move the tensor with `.to(device, dtype)`", self._retype(holder, kind)
            )
        elif isinstance(holder, ast.IfExp) and node in (holder.body, holder.orelse):
            self._check_selection(node, holder, kind, message)
        elif isinstance(holder, ast.Assign) and holder.value is node:
            # `Tensor = torch.cuda.FloatTensor`: the CPU type, each use moved to the device.
            torch, torch_imports = self.ctx.reference("torch", at=node)
            cpu_type = ReplaceExpr(self.ctx.span(node), f"{torch}.{kind}")
            operations, imports, blocker = self.variable_port(node, kind, cpu_type)
            fix = None
            if blocker is None:
                title = f"Use `{torch}.{kind}` and move each tensor to the device"
                fix = self.writer.fix("safe", title, *operations, imports=(*imports, *torch_imports))
            else:
                message += f"; no fix: line {blocker.lineno} uses it another way"
            self.writer.report(node, f"{message}: build the CPU type and move it to the device", fix)
        else:
            device, _ = self.writer.xla_device(node)
            self.writer.report(node, f"{message}: use `torch.tensor(..., dtype=..., device={device})`", None)

    # -- a type used where it is written ------------------------------------------------------
    def _construct(self, call: ast.Call, kind: str) -> Fix | None:
        """``torch.cuda.FloatTensor(x)`` -> ``torch.FloatTensor(x).to(<device>)``."""
        device, imports = self.writer.xla_device(call)
        torch, torch_imports = self.ctx.reference("torch", at=call)
        parts: list[tuple[str, Span]] = []
        arguments = []
        for position, arg in enumerate(call.args):
            value = arg.value if isinstance(arg, ast.Starred) else arg
            parts.append((f"a{position}", self.ctx.span(value)))
            arguments.append(("*" if isinstance(arg, ast.Starred) else "") + f"{{a{position}}}")
        for position, kw in enumerate(call.keywords):
            parts.append((f"k{position}", self.ctx.span(kw.value)))
            arguments.append((f"{kw.arg}=" if kw.arg else "**") + f"{{k{position}}}")
        template = f"{torch}.{kind}({', '.join(arguments)}).to({device})"
        operation = ReplaceExpr(self.ctx.span(call), template, tuple(parts))
        return self.writer.fix(
            "safe", f"Use `{torch}.{kind}(...).to({device})`", operation, imports=(*imports, *torch_imports)
        )

    def _retype(self, call: ast.Call, kind: str) -> Fix | None:
        """``t.type(torch.cuda.FloatTensor)`` -> ``t.to(<device>, torch.float32)``."""
        operation = self.retyped(call, kind)
        if operation is None:
            return None
        device, imports = self.writer.xla_device(call)
        return self.writer.fix("safe", f"Use `.to({device}, ...)`", operation, imports=imports)

    def retyped(self, call: ast.Call, kind: str) -> ReplaceExpr | None:
        if len(call.args) != 1 or call.keywords or not isinstance(call.func, ast.Attribute):
            return None
        device, _ = self.writer.xla_device(call)
        torch, _ = self.ctx.reference("torch", at=call)
        receiver = self.ctx.span(call.func.value)
        return ReplaceExpr(self.ctx.span(call), f"{{t}}.to({device}, {torch}.{DTYPES[kind]})", (("t", receiver),))

    # -- a type chosen by a test --------------------------------------------------------------
    def _check_selection(self, node: ast.Attribute, selection: ast.IfExp, kind: str, message: str) -> None:
        """``torch.cuda.FloatTensor if <test> else torch.FloatTensor``: ported with the test."""
        test = self.writer.short(selection.test, 30)
        self.writer.report(
            node,
            f"{message} chosen by `{test}`: the fix of that test moves the CPU type to the device",
            None,
        )

    def is_selection(self, node: ast.AST) -> bool:
        """``torch.cuda.FloatTensor if <test> else torch.FloatTensor`` (either order)."""
        if not isinstance(node, ast.IfExp):
            return False
        return any(self.kind_of(branch) is not None for branch in (node.body, node.orelse))

    def selection_port(self, selection: ast.IfExp) -> tuple[tuple[Operation, ...], tuple[Import, ...], ast.AST | None]:
        """The operations that port a chosen tensor type with every use, once its test is
        True on every path: the choice becomes the CPU type (``Tensor = torch.FloatTensor``),
        each ``Tensor(...)`` is moved to the device, each ``t.type(Tensor)`` becomes
        ``t.to(<device>, <dtype>)``. ((), the node in the way) when a use is anything else
        (passed on, ``isinstance``) or the choice is not one variable's only value."""
        cuda = selection.body if self.kind_of(selection.body) is not None else selection.orelse
        other = selection.orelse if cuda is selection.body else selection.body
        kind = self.kind_of(cuda)
        cpu = CPU_TYPES.get(self.ctx.semantic.qualified_name(other) or "") if isinstance(other, ast.Attribute) else None
        if kind is None or cpu != kind:
            return (), (), other
        cpu_type = ReplaceExpr(self.ctx.span(selection), "{cpu}", (("cpu", self.ctx.span(other)),))
        return self.variable_port(selection, kind, cpu_type)

    def variable_port(
        self, value: ast.expr, kind: str, cpu_type: ReplaceExpr
    ) -> tuple[tuple[Operation, ...], tuple[Import, ...], ast.AST | None]:
        """``Tensor = <value>`` (a CUDA type, or a choice of one) ported with every use of
        ``Tensor``: ``cpu_type`` writes the CPU type, each use is moved to the device."""
        statement = parent(value)
        if not (
            isinstance(statement, ast.Assign)
            and statement.value is value
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            return (), (), statement
        target = statement.targets[0]
        if len(self.writer.devices.values_of(target)) != 1:
            return (), (), target
        operations: list[Operation] = [cpu_type]
        imports: list[Import] = []
        for use in self.writer.devices.variable_uses(target):
            if use is target:
                continue
            if not isinstance(use.ctx, ast.Load):
                return (), (), use
            holder = parent(use)
            if isinstance(holder, ast.Call) and holder.func is use and not has_star_args(holder):
                device, needed = self.writer.xla_device(holder)
                imports.extend(needed)
                operations.append(
                    ReplaceExpr(self.ctx.span(holder), f"{{c}}.to({device})", (("c", self.ctx.span(holder)),))
                )
            elif (
                isinstance(holder, ast.Call) and method_name(holder) == "type" and holder.args and holder.args[0] is use
            ):
                retyped = self.retyped(holder, kind)
                imports.extend(self.writer.xla_device(holder)[1])
                if retyped is None:
                    return (), (), holder
                operations.append(retyped)
            else:
                return (), (), use
        return tuple(operations), tuple(imports), None


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID = [
    # The CPU types are not CUDA's.
    Valid("import torch\nx = torch.FloatTensor([1.0])\ny = x.type(torch.LongTensor)\n"),
]
INVALID = [
    Invalid(
        """
        import torch
        x = torch.cuda.FloatTensor([1.0, 2.0])
        y = x.type(torch.cuda.LongTensor)
        """,
        fixed="""
        import torch
        import torch_xla

        x = torch.FloatTensor([1.0, 2.0]).to(torch_xla.device())
        y = x.to(torch_xla.device(), torch.int64)
        """,
        count=2,
    ),
    # A name for the type: the CPU type, each use moved to the device.
    Invalid(
        """
        import torch
        Tensor = torch.cuda.LongTensor
        labels = Tensor([1, 0])
        """,
        fixed="""
        import torch
        import torch_xla

        Tensor = torch.LongTensor
        labels = Tensor([1, 0]).to(torch_xla.device())
        """,
        count=1,
    ),
    # Chosen by the availability test: ported with it, with every use (unsafe: the test goes).
    Invalid(
        """
        import torch
        Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
        x = Tensor(2, 3).fill_(1.0)
        y = x.type(Tensor)
        """,
        unsafe_fixed="""
        import torch
        import torch_xla

        Tensor = torch.FloatTensor
        x = Tensor(2, 3).to(torch_xla.device()).fill_(1.0)
        y = x.to(torch_xla.device(), torch.float32)
        """,
        count=2,
    ),
]
