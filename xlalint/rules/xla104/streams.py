"""Streams, events and device contexts.

``with torch.cuda.stream(s):`` and ``with torch.cuda.device(i):`` mean the same on XLA
without the context: the ``with`` goes (or only that item) and its body stays. A stream
or event (``torch.cuda.Stream()``, ``torch.cuda.current_stream()``,
``torch.cuda.Event()``) goes with every use when each use only orders streams. Safe: an
XLA process has one device and no user streams, the compiler orders the work.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import enclosing_statement, method_name, parent
from xlalint.analysis.syntax import whole_statement
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import Fix, RemoveStatement, UnwrapWith
from xlalint.rules._cuda_api import CudaApi, lookup
from xlalint.rules.xla104.removal import ObjectRemoval
from xlalint.rules.xla104.writer import Writer

# The uses of a CUDA stream or event (see `StreamRemoval`): statements that order
# streams or tie a tensor to one go; waiting for one is waiting for the XLA device.
STREAM_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "record_stream", "record", "wait"})
STREAM_WAITING_METHODS = frozenset({"synchronize"})


def unwrap_context(writer: Writer, call: ast.Call) -> tuple[UnwrapWith | None, str]:
    """The operation that takes ``call`` out of its ``with``, or None and why not."""
    item = parent(call)
    if not (isinstance(item, ast.withitem) and item.context_expr is call):
        return None, "it is not the context of a `with`"
    if isinstance(parent(item), ast.AsyncWith):
        return None, "an `async with`"
    target = item.optional_vars
    if target is not None:
        # These contexts enter as None: `as name` can go only if nothing reads the name.
        if not isinstance(target, ast.Name):
            return None, f"the `with` binds `{writer.short(target, 30)}`"
        read = writer.devices.first_read(target)
        if read is not None:
            return None, f"line {read.lineno} reads `{target.id}`"
    return UnwrapWith(writer.ctx.span(call)), ""


class Streams:
    def __init__(self, writer: Writer):
        self.writer = writer

    def check_context(self, call: ast.Call, short: str, row: CudaApi) -> None:
        """``with torch.cuda.stream(s):``, ``with torch.cuda.device(i):``: on XLA the body
        means the same without the context, so the ``with`` goes (or only this item)."""
        message = self.writer.spell(row.message, call, short)[0]
        unwrap, refusal = unwrap_context(self.writer, call)
        if unwrap is None:
            self.writer.report(call, f"{message} (no fix: {refusal})", None)
            return
        fix = self.writer.fix("safe", f"Drop `{short}(...)`, keep the body of the `with`", unwrap)
        self.writer.report(call, message, fix)

    def check_stream(self, call: ast.Call, short: str, row: CudaApi) -> None:
        message = self.writer.spell(row.message, call, short)[0]
        removal = StreamRemoval(self.writer, call)
        fix = removal.fix()
        if fix is None:
            message += f" (no fix: {removal.blocker})"
        self.writer.report(call, message, fix)


class StreamRemoval(ObjectRemoval):
    """The safe fix that removes a CUDA stream or event (``torch.cuda.Stream()``,
    ``torch.cuda.current_stream()``, ``torch.cuda.Event()``) with every use of it.

    An XLA process has one device and no user streams: the compiler orders the work.
    So a use goes when it only orders streams: the context of a ``with`` (``with
    torch.cuda.stream(s):`` keeps its body), a statement such as ``s.wait_stream(t)``,
    ``torch.cuda.current_stream().wait_stream(s)``, ``x.record_stream(s)``,
    ``e.record(s)`` or ``torch.cuda.set_stream(s)``; and waiting for a stream or an event
    (``s.synchronize()``) is waiting for the device: ``torch_xla.sync()`` (the pending
    graph runs) then ``xm.wait_device_ops()``. A stream
    that is not assigned (``torch.cuda.current_stream().wait_stream(s)``) is its own only
    use. Any other use (``e.elapsed_time(f)``, ``s.query()``, passing it on) blocks the fix.
    """

    def is_construction(self, value: ast.AST) -> bool:
        api = self._api(value)
        return api is not None and api[1].action == "stream"

    def _api(self, node: ast.AST) -> tuple[str, CudaApi] | None:
        """The table's row for a ``torch.cuda``/``torch.accelerator`` call."""
        name = self.ctx.semantic.call_name(node) if isinstance(node, ast.Call) else None
        return lookup(name) if name else None

    def fix(self) -> Fix | None:
        if isinstance(parent(self.call), (ast.Assign, ast.AnnAssign)):
            if self.rewritten_uses() is None:
                return None
            self.remove_constructions()
        elif not self.rewrite(self.call):
            self._blocked(enclosing_statement(self.call) or self.call, self.refusal)
            return None
        return self.writer.fix(
            "safe", "Remove the CUDA stream or event and what uses it", *self.operations, imports=tuple(self.imports)
        )

    def rewrite(self, use: ast.AST) -> bool:
        holder = parent(use)
        if isinstance(holder, ast.Attribute) and holder.value is use:  # `s.wait_stream(t)`
            call = parent(holder)
            if not (isinstance(call, ast.Call) and call.func is holder):
                return False
            return self._rewrite_statement(call, holder.attr)
        if isinstance(holder, ast.keyword):
            holder = parent(holder)
        if not isinstance(holder, ast.Call) or holder.func is use:
            return False
        api = self._api(holder)
        if api is not None and api[1].action == "context":  # `with torch.cuda.stream(s):`
            unwrap, _ = unwrap_context(self.writer, holder)
            if unwrap is None:
                self.refusal = "has a `with` the fix cannot drop"
                return False
            self.operations.append(unwrap)
            return True
        if api is not None and api[0] == "set_stream":
            return self._rewrite_statement(holder, "set_stream")
        method = method_name(holder)
        if method in STREAM_ORDERING_METHODS:  # `t.wait_stream(s)`, `x.record_stream(s)`
            return self._rewrite_statement(holder, method)
        return False

    def _rewrite_statement(self, call: ast.Call, method: str) -> bool:
        """Remove the statement that is nothing but ``call``, or make it wait for the device."""
        stmt = whole_statement(call)
        if stmt is None or method not in (*STREAM_ORDERING_METHODS, *STREAM_WAITING_METHODS, "set_stream"):
            return False
        if any(node is not call and self._api(node) is None for node in ast.walk(stmt) if isinstance(node, ast.Call)):
            self.refusal = "does more than order streams"  # `next(batches).record_stream(s)`
            return False
        if method in STREAM_WAITING_METHODS:
            port = self.writer.wait_for_the_device(call)
            if port is None:
                return False
            operations, imports = port
            self.operations.extend(operations)
            self.imports.extend(imports)
        else:
            self.operations.append(RemoveStatement(self.ctx.span(stmt)))
        return True


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID: list[Valid] = []
INVALID = [
    # A side stream: the `with` keeps its body (and its comments), the stream goes
    # with every statement that orders streams; waiting for it is waiting for the device.
    Invalid(
        """
        import torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # overlap with the copy
            # on the side stream
            y = model(x)
        torch.cuda.current_stream().wait_stream(side)
        y.record_stream(torch.cuda.current_stream())
        side.synchronize()
        """,
        fixed="""
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm

        # overlap with the copy
        # on the side stream
        y = model(x)
        torch_xla.sync()
        xm.wait_device_ops()
        """,
        count=5,
    ),
    # Device contexts: only the CUDA item of a `with` goes; a one-line `with` and an
    # `as` name that nothing reads (the context binds None) are unwrapped too.
    Invalid(
        """
        import torch
        with torch.cuda.device(rank), torch.no_grad():
            out = model(x)
        for x in batches:
            with torch.cuda.device(rank): out = model(x)
        with torch.cuda.stream(s) as unused:
            out = model(x)
        """,
        fixed="""
        import torch
        with torch.no_grad():
            out = model(x)
        for x in batches:
            out = model(x)
        out = model(x)
        """,
        count=3,
    ),
    # No fix: an event that times (it has no XLA value), an `as` name that is read,
    # a captured CUDA graph (its body runs at each replay), a name with no counterpart.
    Invalid(
        """
        import torch
        start = torch.cuda.Event(enable_timing=True)
        start.record()
        with torch.cuda.stream(s) as ctx:
            print(ctx)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = model(x)
        torch.cuda.set_sync_debug_mode(1)
        print(start.elapsed_time(end))
        """,
        count=5,
    ),
]
