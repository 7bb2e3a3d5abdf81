"""XLA103 for loops that do not train: an evaluation or sampling loop that carries
device-tensor state (``total += loss``) and reads it on the host every iteration, with no
sync point. Each read compiles the state's graph, one iteration longer than the last."""

from __future__ import annotations

from xlalint.engine.rule import Rule
from xlalint.rules.xla103.sync_fix import sync_fix

# Why and what to do (sync on every process, or read the state after the loop) are the
# explanation's. At most two names: the span shows the loop.
MESSAGE = "loop carries device tensors ({names}) unsynced: each read compiles a longer graph"
SHOWN_NAMES = 1

# Under a per-process test the cost gives way to why there is no fix.
RANK_MESSAGE = "loop carries device tensors ({names}) unsynced, under a per-process test: no fix"


def carried_names(names: list[str]) -> str:
    """``names`` quoted for the message, the first ``SHOWN_NAMES`` of them."""
    shown = ", ".join(f"`{name}`" for name in names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


def check(rule: Rule) -> None:
    """Report each such loop of an XLA script, with the sync fix. Under a test that
    differs between processes the fix is left out: a sync there is XLA207's hang."""
    ctx = rule.ctx
    if not ctx.semantic.imports.imports_module("torch_xla"):
        return  # a CUDA/CPU script: it compiles nothing (after the port, the engine asks again)
    for state in ctx.loop_state.loops:
        if state.syncs or not state.reads:
            continue
        names = carried_names(sorted(state.names))
        message = MESSAGE.format(names=names)
        if ctx.ranks.rank_test(state.node) is not None:
            rule.report(state.node, RANK_MESSAGE.format(names=names))
        else:
            rule.report(state.node, message, fix=sync_fix(rule, state.node, state.first))
