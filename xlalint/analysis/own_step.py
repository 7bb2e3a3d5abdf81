"""``xm.optimizer_step(opt)`` -> ``opt.step()``: the optimizer's own step, for a file
whose gradients need no per-process all-reduce.

``xm.optimizer_step`` all-reduces the gradients across processes, then steps. Where
they are reduced already (torch_xla FSDP, XLA209) or global (SPMD, XLA210) that
reduction is wrong, and the fix both rules offer is the plain step built here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from xlalint.model import Fix, ReplaceExpr, Span

# `xm.optimizer_step`'s parameters that the plain step can carry over, in their
# positional order (torch_xla 2.9: `optimizer_step(optimizer, barrier=False,
# optimizer_args={}, groups=None, pin_layout=True)`).
PARAMETERS = ("optimizer", "barrier", "optimizer_args")


def stepped_optimizer(call: ast.Call) -> ast.expr | None:
    """The optimizer ``xm.optimizer_step(opt, ...)`` steps (first argument or ``optimizer=``)."""
    if call.args:
        return call.args[0]
    return next((kw.value for kw in call.keywords if kw.arg == "optimizer"), None)


def plain_optimizer_step(call: ast.Call) -> tuple[str, tuple[tuple[str, ast.expr], ...]] | None:
    """``xm.optimizer_step(opt, optimizer_args=args)`` as the optimizer's own step: the
    template ``{opt}.step(**{args})`` and its parts, or None when the call asks for more
    (``barrier=True`` was also a sync point, ``groups=``, ``pin_layout=``)."""
    if len(call.args) > len(PARAMETERS) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    values: dict[str, ast.expr] = dict(zip(PARAMETERS, call.args))
    for kw in call.keywords:
        if kw.arg not in PARAMETERS or kw.arg in values:
            return None
        values[kw.arg] = kw.value
    barrier = values.get("barrier")
    if "optimizer" not in values or not (
        barrier is None or (isinstance(barrier, ast.Constant) and barrier.value is False)
    ):
        return None
    if "optimizer_args" in values:
        return "{opt}.step(**{args})", (("opt", values["optimizer"]), ("args", values["optimizer_args"]))
    return "{opt}.step()", (("opt", values["optimizer"]),)


def own_step_fix(call: ast.Call, span_of: Callable[[ast.AST], Span], why: str) -> Fix | None:
    """The safe fix ``xm.optimizer_step(opt, ...)`` -> ``opt.step(...)``, described as
    "step the optimizer itself: ``why``" (why the reduction is not needed), or None
    when the call cannot become a plain step. ``span_of`` locates a node in the file
    (``Context.span``)."""
    plain = plain_optimizer_step(call)
    if plain is None:
        return None
    template, parts = plain
    replace = ReplaceExpr(span_of(call), template, tuple((name, span_of(node)) for name, node in parts))
    return Fix("safe", f"step the optimizer itself: {why}", (replace,))
