"""XLA201 torch-save: ``torch.save`` in a script that uses torch_xla.

``torch.save`` of XLA tensors moves them to the host one at a time: each tensor that is
still pending is its own graph to compile and run, and every process of a multi-process
script writes the same file. ``xm.save`` moves everything to the CPU in one transfer and
writes once, on the master process.
"""

from __future__ import annotations

import ast
import re

from xlalint.analysis.reaching import reaching_values
from xlalint.analysis.semantic import Semantic, ancestors, dotted_name
from xlalint.analysis.values import enclosing_scopes, walk_scope
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import ReplaceExpr, SetKeyword

TORCH_SAVE = frozenset({"torch.save", "torch.serialization.save"})
TORCH_LOAD = frozenset({"torch.load", "torch.serialization.load"})
# An in-memory file, and the methods that read what was written into it.
IN_MEMORY = frozenset({"io.BytesIO"})
_READ_BACK = frozenset({"getvalue", "getbuffer", "read", "readinto", "seek"})
# Words that make a value "this process's rank": a save guarded by one, or to a path
# built from one, is the user's choice of writer, which `master_only=False` keeps.
_RANK = re.compile(r"rank|ordinal|master|is_main|main_process|local_process_index|process_index", re.IGNORECASE)


class TorchSave(Rule):
    code = "XLA201"
    name = "torch-save"
    summary = "`torch.save` in an XLA script: use `xm.save`"
    explanation = """
## Why

`torch.save` of a model's `state_dict()` on an XLA device copies the tensors to the
host one by one. In a script that has not synced, each pending tensor is then its own
graph: measured on a ported CUDA script, one compile per tensor (33 compiles, over half
of the run time). In a multi-process script every process also writes the same file at
the same time. `xm.save(data, path)` syncs and moves all XLA tensors to the CPU in one
go and writes only on the master process (`master_only=True`).

## What is flagged

`torch.save(...)` (however torch is imported) in a file that imports torch_xla. Not
flagged: a save into an in-memory buffer (`buf = io.BytesIO()`) that the same process
reads back (`torch.load(buf)`, `buf.getvalue()`): nothing is written for other
processes, and `xm.save` writes only on the master, so every other process would read
an empty buffer.

## Fix

safe: `torch.save(obj, path)` -> `xm.save(obj, path)`. When the save is guarded by a
rank test (`if xm.is_master_ordinal():`, `if rank == 0:`) or writes a per-process path
(`f"ckpt_{rank}.pt"`), the fix passes `master_only=False` so that the processes that
wrote before still write. No fix for calls with `torch.save`'s other arguments
(`pickle_protocol=`, ...), which `xm.save` does not take.

## Example

```python
torch.save(model.state_dict(), "model.pt")
```
becomes
```python
xm.save(model.state_dict(), "model.pt")
```
"""
    fix_availability = "safe"

    VALID = [
        # Already xm.save.
        Valid(
            """
            import torch_xla.core.xla_model as xm
            xm.save(model.state_dict(), "model.pt")
            """
        ),
        # No torch_xla in the file: a plain PyTorch script.
        Valid(
            """
            import torch
            torch.save(model.state_dict(), "model.pt")
            """
        ),
        # Another module's `save`.
        Valid(
            """
            import numpy as np
            import torch_xla
            np.save("a.npy", x)
            """
        ),
        # Into a buffer read back by the same process (a deep copy by serialization).
        Valid(
            """
            import io
            import torch
            import torch_xla
            buffer = io.BytesIO()
            torch.save(model.state_dict(), buffer)
            buffer.seek(0)
            clone.load_state_dict(torch.load(buffer))
            with io.BytesIO() as stream:
                torch.save(batch, stream)
                size = len(stream.getvalue())
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            torch.save(model.state_dict(), "model.pt")
            """,
            fixed="""
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm

            xm.save(model.state_dict(), "model.pt")
            """,
            count=1,
        ),
        # An existing alias is reused; keywords are renamed to xm.save's.
        Invalid(
            """
            import torch as T
            from torch_xla.core import xla_model
            T.save(obj={"step": step}, f=path)
            """,
            fixed="""
            import torch as T
            from torch_xla.core import xla_model
            xla_model.save({"step": step}, path)
            """,
            count=1,
        ),
        # Guarded by a rank test: the guard chooses the writer, so every process the
        # guard lets through still writes.
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            if xm.is_master_ordinal():
                torch.save(model.state_dict(), "model.pt")
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            if xm.is_master_ordinal():
                xm.save(model.state_dict(), "model.pt", master_only=False)
            """,
            count=1,
        ),
        # One file per process.
        Invalid(
            """
            import torch
            import torch_xla.runtime as xr
            torch.save(state, f"ckpt_{xr.global_ordinal()}.pt")
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr

            xm.save(state, f"ckpt_{xr.global_ordinal()}.pt", master_only=False)
            """,
            count=1,
        ),
        # torch.save's own options: reported, no fix.
        Invalid(
            """
            import torch
            import torch_xla
            torch.save(state, path, pickle_protocol=4)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.semantic.imports.imports_module("torch_xla"):
            return
        for call in self.ctx.semantic.calls_of("save"):
            if self.ctx.semantic.call_name(call) in TORCH_SAVE and not _read_back_in_memory(self.ctx.semantic, call):
                fix = self._fix(call)
                message = None if fix else f"{self.summary} (it takes only the data and the path: no automatic fix)"
                self.report(call, message, fix=fix)

    def _fix(self, call: ast.Call):
        arguments = _save_arguments(call)
        if arguments is None:
            return None
        data, target = arguments
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        per_process = _mentions_rank(target) or any(
            isinstance(anc, (ast.If, ast.IfExp, ast.While)) and _mentions_rank(anc.test)  # type: ignore[union-attr]
            for anc in ancestors(call)
        )
        if not call.keywords:
            operations = [ReplaceExpr(self.ctx.span(call.func), f"{xm}.save")]
            if per_process:
                operations.append(SetKeyword(self.ctx.span(call), "master_only", "False"))
        else:
            extra = ", master_only=False" if per_process else ""
            operations = [
                ReplaceExpr(
                    self.ctx.span(call),
                    f"{xm}.save({{data}}, {{target}}{extra})",
                    (("data", self.ctx.span(data)), ("target", self.ctx.span(target))),
                )
            ]
        message = "use `xm.save` (one transfer, written by the master process)"
        if per_process:
            message = "use `xm.save(..., master_only=False)` (one transfer; the same processes write)"
        return self.fix("safe", message, *operations, imports=imports)


def _save_arguments(call: ast.Call) -> tuple[ast.expr, ast.expr] | None:
    """(data, path) of ``torch.save(obj, f)``, or None when the call passes more."""
    values: dict[str, ast.expr] = dict(zip(("obj", "f"), call.args))
    if len(call.args) > 2 or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    for kw in call.keywords:
        if kw.arg not in ("obj", "f") or kw.arg in values:
            return None
        values[kw.arg] = kw.value
    if set(values) != {"obj", "f"}:
        return None
    return values["obj"], values["f"]


def _read_back_in_memory(semantic: Semantic, call: ast.Call) -> bool:
    """``torch.save`` writes into an ``io.BytesIO`` that the same function (or module)
    reads back: ``torch.load(buf)``, ``buf.getvalue()``, ``buf.seek(0)``..."""
    arguments = _save_arguments(call)
    target = arguments[1] if arguments is not None else None
    if not isinstance(target, ast.Name) or not _holds_buffer(semantic, target):
        return False
    scope = next(enclosing_scopes(call), None)
    for node in walk_scope(scope, shallow=True) if scope is not None else ():
        if not isinstance(node, ast.Call) or node is call:
            continue
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in _READ_BACK
            and _is_name(node.func.value, target.id)
        ):
            return True
        if node.args and _is_name(node.args[0], target.id) and semantic.call_name(node) in TORCH_LOAD:
            return True
    return False


def _holds_buffer(semantic: Semantic, name: ast.Name) -> bool:
    """``name`` holds an ``io.BytesIO``: every assignment that reaches it makes one, or a
    ``with io.BytesIO() as name:`` around it binds it."""
    for ancestor in ancestors(name):
        if isinstance(ancestor, (ast.With, ast.AsyncWith)):
            for item in ancestor.items:
                if _is_name(item.optional_vars, name.id):
                    return _is_buffer(semantic, item.context_expr)
    values = reaching_values(name)
    return bool(values) and all(_is_buffer(semantic, value) for value in values)


def _is_buffer(semantic: Semantic, value: ast.expr) -> bool:
    return isinstance(value, ast.Call) and semantic.call_name(value) in IN_MEMORY


def _is_name(node: ast.AST | None, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _mentions_rank(expr: ast.AST) -> bool:
    for node in ast.walk(expr):
        name = dotted_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name and _RANK.search(name.rsplit(".", 1)[-1]):
            return True
    return False
