"""The ``torch.cuda.*`` and ``torch.accelerator.*`` calls of the table in
``xlalint/rules/_cuda_api.py``, by the action their row names: ``remove`` a statement
(``torch.cuda.empty_cache()``), ``replace`` a call (``torch.cuda.synchronize()`` ->
``torch_xla.sync()`` then ``xm.wait_device_ops()``), a memory ``query`` (reported with
``xm.get_memory_info(device)``, never fixed), the current
accelerator as a ``device``; autocast, the scaler, streams, device contexts and the
availability test go to their own parts.
"""

from __future__ import annotations

import ast
import re

from xlalint.analysis.devices import CURRENT_ACCELERATOR
from xlalint.analysis.semantic import ancestors, parent, string_value
from xlalint.analysis.syntax import has_star_args, is_self_attribute, whole_statement
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import Fix, RemoveStatement, ReplaceExpr
from xlalint.rules._cuda_api import CudaApi
from xlalint.rules.xla104.amp import Amp
from xlalint.rules.xla104.availability import Availability
from xlalint.rules.xla104.streams import Streams
from xlalint.rules.xla104.writer import Writer


class CudaCalls:
    def __init__(self, writer: Writer, availability: Availability, amp: Amp, streams: Streams):
        self.writer = writer
        self.tensor_types = availability.tensor_types
        self.ctx = writer.ctx
        self.availability = availability
        self.amp = amp
        self.streams = streams

    def check(self, call: ast.Call, name: str, short: str, row: CudaApi) -> None:
        if row.action == "availability":
            self.availability.add(call)
        elif row.action == "device":
            if name in CURRENT_ACCELERATOR and (line := self._formatted_into_string(call)):
                # `torch.device(f"{acc}:{rank}")`: the accelerator is a device *type* there;
                # `torch_xla.device()` is `xla:0` and would make it "xla:0:0".
                message = f"{row.message}; line {line} formats it into a device string: port it by hand"
                self.writer.report(call, message, None)
            else:
                self.writer.report_device(call, row.message)
        elif row.action == "autocast":
            self.amp.check_autocast(call, name)
        elif row.action == "grad_scaler":
            self.amp.check_grad_scaler(call, name)
        elif row.action == "remove":
            stmt = whole_statement(call)
            fix = (
                self.writer.fix("safe", f"Remove `{short}(...)`", RemoveStatement(self.ctx.span(stmt)))
                if stmt
                else None
            )
            self.writer.report(call, self.writer.spell(row.message, call, short)[0], fix)
        elif row.action == "query":
            # No fix: any number written in its place is one the device never reported.
            self.writer.report(call, self.writer.spell(row.message, call, short)[0], None)
        elif row.action == "wait":
            self.writer.report(call, self.writer.spell(row.message, call, short)[0], self._wait_fix(call, short))
        elif row.action == "replace":
            self.writer.report(
                call, self.writer.spell(row.message, call, short)[0], self._replace_fix(call, short, row)
            )
        elif row.action == "tensor_type":
            self.tensor_types.check_reference(call.func)  # type: ignore[arg-type]
        elif row.action == "context":
            self.streams.check_context(call, short, row)
        elif row.action == "stream":
            self.streams.check_stream(call, short, row)
        else:
            self.writer.report(call, self.writer.spell(row.message, call, short)[0], None)

    def _wait_fix(self, call: ast.Call, short: str) -> Fix | None:
        if call.args or call.keywords:
            return None
        port = self.writer.wait_for_the_device(call)
        if port is None:
            return None
        operations, imports = port
        title = "Run the pending graph, then wait for it" if len(operations) > 1 else "Wait for the device"
        return self.writer.fix("safe", title, *operations, imports=imports)

    def _replace_fix(self, call: ast.Call, short: str, row: CudaApi) -> Fix | None:
        if call.keywords or has_star_args(call) or len(call.args) != row.arguments:
            return None
        code, imports = self.writer.spell(row.template or "", call, short)
        if code == "True":
            operations = self.writer.assume_true(call, lambda node: node is call)
            return self.writer.fix(row.applicability, "Use `True`", *operations) if operations else None
        parts = (("arg0", self.ctx.span(call.args[0])),) if row.arguments else ()
        title = f"Use `{code.replace('{arg0}', '...')}`"
        if row.template is not None and row.template.startswith("{manual_seed}"):
            # A seed under `if torch.cuda.is_available():` goes where it runs on XLA.
            moved = self.availability.moved_seed(call, code.removesuffix("({arg0})"))
            if moved is not None:
                return (
                    self.writer.fix(row.applicability, f"{title} before the test", *moved, imports=imports)
                    if moved
                    else None
                )
        return self.writer.fix(row.applicability, title, ReplaceExpr(self.ctx.span(call), code, parts), imports=imports)

    def _formatted_into_string(self, call: ast.Call) -> int | None:
        """The line where the name or ``self.<attr>`` that ``call`` is assigned to is
        formatted into a device string with an index (``f"{acc}:{rank}"``), if there is one."""
        stmt = parent(call)
        if not (isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is call):
            return None
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1:
            return None
        target = targets[0]
        if isinstance(target, ast.Name):
            scope = self.writer.devices.scope_of(target)

            def same(node: ast.AST) -> bool:
                return (
                    isinstance(node, ast.Name) and node.id == target.id and self.writer.devices.scope_of(node) is scope
                )

        elif is_self_attribute(target):
            owner = next((a for a in ancestors(stmt) if isinstance(a, ast.ClassDef)), None)

            def same(node: ast.AST) -> bool:
                return (
                    is_self_attribute(node)
                    and node.attr == target.attr  # type: ignore[attr-defined]
                    and next((a for a in ancestors(node) if isinstance(a, ast.ClassDef)), None) is owner
                )

        else:
            return None
        # Followed by ":<index>": `f"{acc}:{rank}"`, `str(acc) + f":{rank}"` (a log line,
        # `print(f"device: {acc}")`, reads fine as "xla:0").
        for node in self.ctx.semantic.nodes_of(ast.JoinedStr):
            for i, value in enumerate(node.values):
                if isinstance(value, ast.FormattedValue) and same(value.value) and _index_suffix(node.values[i + 1 :]):
                    return node.lineno
        for node in self.ctx.semantic.nodes_of(ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1 and same(node.args[0]):
                holder = parent(node)
                if isinstance(holder, ast.BinOp) and holder.left is node:
                    right = holder.right
                    if _index_suffix(right.values if isinstance(right, ast.JoinedStr) else [right]):
                        return node.lineno
        return None


def _index_suffix(parts: list[ast.AST]) -> bool:
    """The parts of a string that follow a device type are its index: ``:0``, or ``:``
    then a formatted value (``:{rank}``)."""
    if not parts:
        return False
    text = string_value(parts[0]) or ""
    if re.match(r":\d", text):
        return True
    return text == ":" and len(parts) > 1 and isinstance(parts[1], ast.FormattedValue)


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID: list[Valid] = []
INVALID = [
    Invalid(
        """
        import torch
        from torch import cuda
        import torch_xla.core.xla_model as xm
        cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.set_device(local_rank)
        torch.cuda.manual_seed_all(seed)
        """,
        fixed="""
        import torch
        from torch import cuda
        import torch_xla
        import torch_xla.core.xla_model as xm

        torch_xla.sync()
        xm.wait_device_ops()
        torch_xla.manual_seed(seed)
        """,
        count=4,
    ),
    # A wait for the device runs the pending graph first, or the timing measures the
    # tracing; only the wait where a sync directly precedes. No place for the sync in a
    # one-line `if`: reported without a fix.
    Invalid(
        """
        import time
        import torch
        import torch_xla
        def timed(model, x):
            loss = model(x).sum()
            torch_xla.sync()
            torch.cuda.synchronize()
            t0 = time.time()
            loss = model(x).sum()
            # the step is done
            torch.cuda.synchronize()
            if x.numel(): torch.cuda.synchronize()
            return time.time() - t0
        """,
        fixed="""
        import time
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm

        def timed(model, x):
            loss = model(x).sum()
            torch_xla.sync()
            xm.wait_device_ops()
            t0 = time.time()
            loss = model(x).sum()
            # the step is done
            torch_xla.sync()
            xm.wait_device_ops()
            if x.numel(): torch.cuda.synchronize()
            return time.time() - t0
        """,
        count=3,
    ),
    # Removing is only possible for a whole statement.
    Invalid(
        """
        import torch
        ok = torch.cuda.empty_cache() or True
        """,
        count=1,
    ),
    # The memory API: a reset goes (it returns nothing, and raises without CUDA); a
    # query is reported with `xm.get_memory_info(device)` and never becomes a number.
    Invalid(
        """
        import torch
        torch.cuda.reset_peak_memory_stats()
        peak = torch.cuda.max_memory_allocated()
        print(f"{torch.cuda.memory_allocated() / 2**20:.0f} MiB")
        """,
        fixed="""
        import torch
        peak = torch.cuda.max_memory_allocated()
        print(f"{torch.cuda.memory_allocated() / 2**20:.0f} MiB")
        """,
        unsafe_fixed="""
        import torch
        peak = torch.cuda.max_memory_allocated()
        print(f"{torch.cuda.memory_allocated() / 2**20:.0f} MiB")
        """,
        count=3,
    ),
    Invalid(
        """
        import torch
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        index = torch.cuda.current_device()
        torch.accelerator.synchronize()
        """,
        fixed="""
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm

        dtype = torch.bfloat16
        index = torch.cuda.current_device()
        torch_xla.sync()
        xm.wait_device_ops()
        """,
        unsafe_fixed="""
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

        dtype = torch.bfloat16
        index = xr.local_ordinal()
        torch_xla.sync()
        xm.wait_device_ops()
        """,
        count=3,
    ),
]
