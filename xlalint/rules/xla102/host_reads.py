"""What XLA102 counts as reading a step tensor on the host: ``.item()`` and friends,
conversions (``float(loss)``), log calls that render a tensor, text made from one, and
conditions on one; and which loop's step a node runs in on every optimizer step."""

from __future__ import annotations

import ast
from functools import cached_property

from xlalint.analysis.order import assigned_names
from xlalint.analysis.semantic import dotted_name, method_name, parent
from xlalint.analysis.steps import HOST_FETCH_METHODS, StepLoop
from xlalint.engine.context import Context

# Builtins that convert a tensor to a Python value (and so read it on the host).
CONVERSIONS = frozenset({"float", "int", "bool", "str", "repr"})
NUMPY_CONVERSIONS = frozenset({"numpy.array", "numpy.asarray"})
# Logging: functions by qualified name, and methods by name.
LOG_FUNCTIONS = frozenset(
    {
        *(
            f"logging.{level}"
            for level in ("debug", "info", "warning", "warn", "error", "critical", "exception", "log")
        ),
        "wandb.log",
        "mlflow.log_metric",
        "mlflow.log_metrics",
        "tqdm.tqdm.write",
        "tqdm.write",
        "tqdm.auto.tqdm.write",
        "torch_xla.core.xla_model.master_print",
    }
)
LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
# Receivers of `.log(...)` other than loggers: experiment trackers.
TRACKERS = frozenset({"wandb", "run", "experiment", "tracker", "accelerator", "mlflow", "neptune"})
# TensorBoard's SummaryWriter and tqdm progress bars: any receiver.
WRITER_METHODS = frozenset(
    {"add_scalar", "add_scalars", "add_histogram", "add_text", "add_image", "add_figure", "log_metrics"}
)
PROGRESS_METHODS = frozenset({"set_postfix", "set_postfix_str", "set_description", "set_description_str"})
# Optimizers whose `step` reads the loss and gradients on the host: LBFGS's line search
# and stopping tests (`float(loss)`, `if` on tensors), several times a step.
HOST_READING_OPTIMIZERS = frozenset({"torch.optim.LBFGS", "torch.optim.lbfgs.LBFGS"})

WHY = "copies it to the host and forces an early graph execution"


def arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(kw.value for kw in call.keywords)]


def is_percent_format(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
    )


def forces_bool(test: ast.expr, loop: StepLoop) -> bool:
    """Evaluating ``test`` as a condition asks for a tensor's truth value."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return forces_bool(test.operand, loop)
    if isinstance(test, ast.BoolOp):
        return any(forces_bool(v, loop) for v in test.values)
    return loop.is_tensor(test)


class HostReads:
    """The host reads of one module's steps."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def host_read(self, node: ast.Call, loop: StepLoop) -> str | None:
        """What ``node`` does that reads a step tensor on the host, if it does (the
        finding's message): ``.item()``, ``float(loss)``, logging a tensor, ..."""
        attr = method_name(node)
        if attr == "item" or (attr in HOST_FETCH_METHODS and loop.is_tensor(node.func.value)):  # type: ignore[union-attr]
            return f"`.{attr}()` in the training step {WHY}"
        if self._is_conversion(node) and loop.is_tensor(node.args[0]):
            return f"`{dotted_name(node.func)}()` of a tensor in the training step {WHY}"
        if self.is_log_call(node) and any(self.renders_tensor(a, loop) for a in arguments(node)):
            return f"logging a tensor in the training step {WHY}"
        if attr == "step" and dotted_name(node.func.value) in self._lbfgs_optimizers:  # type: ignore[union-attr]
            return "LBFGS's `step` reads the loss and gradients on the host several times a step: XLA keeps compiling"
        return None

    @cached_property
    def _lbfgs_optimizers(self) -> frozenset[str]:
        """The names (``opt``, ``self.opt``) assigned an LBFGS optimizer in this module."""
        semantic = self.ctx.semantic
        return frozenset(
            name
            for call in semantic.calls
            if semantic.call_name(call) in HOST_READING_OPTIMIZERS
            for name in assigned_names(call)
        )

    def step_loop(self, node: ast.AST) -> StepLoop | None:
        """The loop whose step runs ``node`` on every optimizer step: the step loop, or
        with gradient accumulation the optimizer-step loop around the micro-steps."""
        steps = self.ctx.steps
        return steps.loop_running_every_step(node) if steps.loops else None

    # -- what counts --------------------------------------------------------------
    def _is_conversion(self, call: ast.Call) -> bool:
        if len(call.args) != 1 or call.keywords:
            return False
        if isinstance(call.func, ast.Name):
            return call.func.id in CONVERSIONS and not self.shadowed(call.func.id)
        return self.ctx.semantic.call_name(call) in NUMPY_CONVERSIONS

    def shadowed(self, name: str) -> bool:
        semantic = self.ctx.semantic
        return name in semantic.imports.bindings or name in semantic.module_functions

    def is_log_call(self, call: ast.Call) -> bool:
        """``print``, ``logging.info``, ``logger.info``, ``wandb.log``, ``writer.add_scalar``,
        ``pbar.set_postfix``, ``xm.master_print``, ..."""
        func = call.func
        if isinstance(func, ast.Name) and func.id == "print":
            return not self.shadowed("print")
        if self.ctx.semantic.call_name(call) in LOG_FUNCTIONS:
            return True
        if not isinstance(func, ast.Attribute):
            return False
        receiver = (dotted_name(func.value) or "").rsplit(".", 1)[-1]
        if func.attr in LOGGER_METHODS and "log" in receiver.lower():
            return True
        if func.attr == "log" and receiver in TRACKERS:
            return True
        if func.attr == "write" and any(word in receiver.lower() for word in ("tqdm", "bar", "progress")):
            return True
        return func.attr in WRITER_METHODS or func.attr in PROGRESS_METHODS

    @staticmethod
    def is_format_call(call: ast.Call) -> bool:
        return method_name(call) == "format" and isinstance(call.func.value, (ast.Constant, ast.JoinedStr))  # type: ignore[union-attr]

    def renders_tensor(self, expr: ast.AST, loop: StepLoop) -> bool:
        """``expr`` is a tensor, or text made from one (f-string, ``%``, ``.format``)."""
        if loop.is_tensor(expr):
            return True
        if isinstance(expr, ast.JoinedStr):
            return any(isinstance(v, ast.FormattedValue) and loop.is_tensor(v.value) for v in expr.values)
        if isinstance(expr, ast.Call) and self.is_format_call(expr):
            return any(loop.is_tensor(a) for a in arguments(expr))
        if is_percent_format(expr):
            right = expr.right  # type: ignore[attr-defined]
            values = right.elts if isinstance(right, ast.Tuple) else [right]
            return any(loop.is_tensor(v) for v in values)
        return False

    def logged(self, node: ast.AST) -> bool:
        """``node`` is an argument of a log call (which is reported instead)."""
        call = parent(node)
        if isinstance(call, ast.keyword):
            call = parent(call)
        return isinstance(call, ast.Call) and node is not call.func and self.is_log_call(call)
