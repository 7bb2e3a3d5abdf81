"""CUDA autocast and the ``GradScaler``.

``torch.cuda.amp.autocast(...)``, ``torch.autocast("cuda")`` (also through a variable:
``device = "cuda"`` ... ``torch.autocast(device_type=device)``) become
``torch.autocast("xla", dtype=torch.bfloat16)``: XLA devices compute in bfloat16. The
CUDA ``GradScaler`` is removed with its uses: bfloat16 has float32's range and needs no
loss scaling, and torch_xla has no GradScaler. Both change the numerics: unsafe.
"""

from __future__ import annotations

import ast

from xlalint.analysis.devices import is_cuda_string
from xlalint.analysis.semantic import Semantic, parent
from xlalint.analysis.syntax import ATOMIC, argument, has_star_args, whole_statement
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import Fix, RemoveStatement, ReplaceExpr, Span
from xlalint.rules.xla104.removal import ObjectRemoval
from xlalint.rules.xla104.writer import Writer

# Autocast that is CUDA whatever its arguments, and the device-generic ones that are
# CUDA when their `device_type` says so. The parameter names in positional order.
CUDA_AUTOCAST = {
    "torch.cuda.amp.autocast": ("enabled", "dtype", "cache_enabled"),
    "torch.cuda.amp.autocast_mode.autocast": ("enabled", "dtype", "cache_enabled"),
}
GENERIC_AUTOCAST = {
    "torch.autocast": ("device_type", "dtype", "enabled", "cache_enabled"),
    "torch.amp.autocast": ("device_type", "dtype", "enabled", "cache_enabled"),
    "torch.amp.autocast_mode.autocast": ("device_type", "dtype", "enabled", "cache_enabled"),
}
# The autocast arguments that keep their meaning on XLA.
KEPT_AUTOCAST_ARGS = ("enabled", "cache_enabled")
CUDA_GRAD_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
# `torch.amp.GradScaler(device="cuda", ...)`: "cuda" is also the default.
GENERIC_GRAD_SCALER = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})
# Gradient clipping (XLA106 wants `scaler.unscale_` before it).
CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_"})
AUTOCAST_MESSAGE = 'CUDA autocast: on XLA use `torch.autocast("xla", dtype=torch.bfloat16)`'


def is_cuda_grad_scaler(semantic: Semantic, node: ast.AST | None) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = semantic.call_name(node)
    if name in CUDA_GRAD_SCALER:
        return True
    if name in GENERIC_GRAD_SCALER:
        device = argument(node, 0, "device")
        return device is None or is_cuda_string(device)
    return False


class Amp:
    def __init__(self, writer: Writer):
        self.writer = writer
        self.ctx = writer.ctx
        # `torch.autocast(device_type=<variable>)`: CUDA autocast if the variable is "cuda"
        # (judged in `finish`, once every assignment has been seen).
        self.by_variable: list[tuple[ast.Call, ast.Name, tuple[str, ...]]] = []

    def check_autocast(self, call: ast.Call, name: str) -> None:
        params = CUDA_AUTOCAST.get(name) or GENERIC_AUTOCAST[name]
        device_type = argument(call, 0, "device_type")
        if name in GENERIC_AUTOCAST and isinstance(device_type, ast.Name):
            self.by_variable.append((call, device_type, params))
            return
        if name in GENERIC_AUTOCAST and not is_cuda_string(device_type):
            return
        self.writer.report(call, AUTOCAST_MESSAGE, self._autocast_fix(call, params))

    def check_autocast_by_variable(self) -> None:
        for call, name, params in self.by_variable:
            values = self.writer.devices.cuda_values(name)
            if values and all(is_cuda_string(v) for v in values):
                self.writer.report(
                    call,
                    f'CUDA autocast (`{name.id}` is a CUDA device): on XLA use `torch.autocast("xla", '
                    "dtype=torch.bfloat16)`",
                    self._autocast_fix(call, params),
                )

    def _autocast_fix(self, call: ast.Call, params: tuple[str, ...]) -> Fix | None:
        if has_star_args(call):
            return None
        torch, imports = self.ctx.reference("torch")
        arguments = ['"xla"', f"dtype={torch}.bfloat16"]
        parts: list[tuple[str, Span]] = []
        for position, name in enumerate(params):
            value = argument(call, position, name)
            if value is not None and name in KEPT_AUTOCAST_ARGS:
                arguments.append(f"{name}={{{name}}}")
                parts.append((name, self.ctx.span(value)))
        template = f"{torch}.autocast(" + ", ".join(arguments) + ")"
        return self.writer.fix(
            "unsafe",
            "Autocast to bfloat16 on XLA",
            ReplaceExpr(self.ctx.span(call), template, tuple(parts)),
            imports=imports,
            unused_imports=self.writer.imported_name(call.func),
        )

    def check_grad_scaler(self, call: ast.Call, name: str) -> None:
        if name in GENERIC_GRAD_SCALER:
            device = argument(call, 0, "device")
            if device is not None and not is_cuda_string(device):
                return
        removal = ScalerRemoval(self.writer, call)
        fix = removal.fix()
        message = "CUDA `GradScaler`: bfloat16 on XLA needs no loss scaling"
        if fix is None:
            message += f" (no fix: {removal.blocker})"
        self.writer.report(call, message, fix)


class ScalerRemoval(ObjectRemoval):
    """The unsafe fix that removes a ``GradScaler`` and rewrites every use of it: each
    use must be one of the method calls of ``rewrite``."""

    def is_construction(self, value: ast.AST) -> bool:
        return is_cuda_grad_scaler(self.ctx.semantic, value)

    def fix(self) -> Fix | None:
        uses = self.rewritten_uses()
        if uses is None:
            return None
        if not uses or not self._may_gain_an_unscale(uses):
            self.remove_constructions()
        return self.writer.fix(
            "unsafe",
            "Remove the GradScaler (bfloat16 needs no loss scaling)",
            *self.operations,
            unused_imports=self.writer.imported_name(self.call.func),
        )

    def _may_gain_an_unscale(self, uses: list[ast.AST]) -> bool:
        """A clip with no ``scaler.unscale_`` is what XLA106 fixes by inserting
        ``scaler.unscale_(opt)``, in the same pass as this fix (an insertion claims
        no span, so the fix loop cannot see the clash). Then the construction is kept
        for one more pass: the inserted call is a use the next pass removes, with
        the construction, instead of a dangling name."""
        methods = {parent(use).attr for use in uses}  # type: ignore[union-attr]
        if "unscale_" in methods:
            return False
        return any(
            isinstance(call.func, (ast.Name, ast.Attribute))
            and (call.func.id if isinstance(call.func, ast.Name) else call.func.attr) in CLIP_FUNCTIONS
            for call in self.ctx.semantic.calls
        )

    def rewrite(self, use: ast.AST) -> bool:
        """Record the operation that removes one use: ``scaler.<method>(...)``."""
        attribute = parent(use)
        call = parent(attribute)
        if not (isinstance(attribute, ast.Attribute) and isinstance(call, ast.Call) and call.func is attribute):
            return False
        method = attribute.attr
        span = self.ctx.span(call)
        if has_star_args(call):
            return False
        if method == "scale" and len(call.args) == 1 and not call.keywords:
            # scaler.scale(loss) -> loss (in parentheses where `.backward()` follows).
            needs_parens = not isinstance(call.args[0], ATOMIC) and isinstance(
                parent(call), (ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Await)
            )
            template = "({loss})" if needs_parens else "{loss}"
            self.operations.append(ReplaceExpr(span, template, (("loss", self.ctx.span(call.args[0])),)))
            return True
        if method == "step" and len(call.args) == 1 and not call.keywords:
            optimizer = call.args[0]
            template = "{opt}.step()" if isinstance(optimizer, ATOMIC) else "({opt}).step()"
            self.operations.append(ReplaceExpr(span, template, (("opt", self.ctx.span(optimizer)),)))
            return True
        if method in ("update", "unscale_", "load_state_dict"):
            stmt = whole_statement(call)
            if stmt is None:
                return False
            self.operations.append(RemoveStatement(self.ctx.span(stmt)))
            return True
        if method == "is_enabled" and not call.args and not call.keywords:
            # False once the scaler goes: the test it is in follows (never `if False:`).
            operations = self.writer.assume_true(call, lambda node: node is call, known=False)
            if operations is None:
                return False
            self.operations.extend(operations)
            return True
        replacements = {"get_scale": "1.0", "state_dict": "{{}}"}
        if method in replacements and not call.args and not call.keywords:
            self.operations.append(ReplaceExpr(span, replacements[method]))
            return True
        return False


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID: list[Valid] = []
INVALID = [
    # `scaler.is_enabled()` is False once the scaler goes: its test takes the other branch
    # in place of the `if` (never `if False:`).
    Invalid(
        """
        import torch
        scaler = torch.cuda.amp.GradScaler()
        loss = model(x)
        scaler.scale(loss).backward()
        if scaler.is_enabled():
            print(scaler.get_scale())
        else:
            print("no scaling")
        scaler.step(opt)
        scaler.update()
        """,
        unsafe_fixed="""
        import torch
        loss = model(x)
        loss.backward()
        print("no scaling")
        opt.step()
        """,
        count=1,
    ),
    Invalid(
        """
        import torch
        with torch.cuda.amp.autocast(enabled=use_amp):
            out = model(x)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            out = model(x)
        """,
        unsafe_fixed="""
        import torch
        with torch.autocast("xla", dtype=torch.bfloat16, enabled=use_amp):
            out = model(x)
        with torch.autocast("xla", dtype=torch.bfloat16):
            out = model(x)
        """,
        count=2,
    ),
    Invalid(
        """
        import torch
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            with torch.autocast("cuda"):
                loss = model(x)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
        """,
        unsafe_fixed="""
        import torch
        for x, y in loader:
            with torch.autocast("xla", dtype=torch.bfloat16):
                loss = model(x)
            loss.backward()
            opt.step()
        """,
        count=2,
    ),
    # A clip with no `unscale_` (XLA106 may insert one in the same pass): the
    # construction goes one pass later; the end result is the same.
    Invalid(
        """
        import torch
        scaler = torch.cuda.amp.GradScaler()
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        scaler.step(opt)
        scaler.update()
        """,
        unsafe_fixed="""
        import torch
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        """,
        count=1,
    ),
    # A scaler passed to a helper cannot be removed: reported without a fix.
    Invalid(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        train(model, scaler)
        """,
        count=1,
    ),
    # Two functions, two scalers: each is removed with its own uses.
    Invalid(
        """
        import torch
        def train(opt, loss):
            scaler = torch.cuda.amp.GradScaler()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        def finetune(opt, loss):
            scaler = torch.cuda.amp.GradScaler(init_scale=1024)
            scaler.scale(loss * 2).backward()
            scaler.step(opt)
            scaler.update()
        """,
        unsafe_fixed="""
        import torch
        def train(opt, loss):
            loss.backward()
            opt.step()
        def finetune(opt, loss):
            (loss * 2).backward()
            opt.step()
        """,
        count=2,
    ),
    # A device string that is also autocast's `device_type` stays a string; that
    # autocast is CUDA's, and goes to bfloat16 like any other.
    Invalid(
        """
        import torch
        device = "cuda"
        x = torch.ones(2, device=device)
        with torch.autocast(device_type=device, dtype=torch.float16):
            pass
        """,
        fixed="""
        import torch
        import torch_xla

        device = "xla"
        x = torch.ones(2, device=device)
        with torch.autocast(device_type=device, dtype=torch.float16):
            pass
        """,
        unsafe_fixed="""
        import torch
        import torch_xla

        device = "xla"
        x = torch.ones(2, device=device)
        with torch.autocast("xla", dtype=torch.bfloat16):
            pass
        """,
        count=2,
    ),
    # The AMP recipe builds its scaler twice: both go, with every use.
    Invalid(
        """
        import torch
        scaler = torch.amp.GradScaler("cuda")
        for x in data:
            scaler.scale(model(x)).backward()
            scaler.step(opt)
            scaler.update()
        scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
        for x in data:
            scaler.scale(model(x)).backward()
            scaler.step(opt)
            scaler.update()
        state = {"scaler": scaler.state_dict()}
        """,
        unsafe_fixed="""
        import torch
        for x in data:
            model(x).backward()
            opt.step()
        for x in data:
            model(x).backward()
            opt.step()
        state = {"scaler": {}}
        """,
        count=2,
    ),
]
