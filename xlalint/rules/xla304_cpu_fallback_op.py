"""XLA304 cpu-fallback-op: an op torch_xla does not lower, in the training step.

torch_xla runs an op it has no lowering for on the CPU: it executes the graph built so
far, copies the inputs to the host, runs the op with PyTorch's CPU kernel and copies the
result back, on every step. Which ops do that is measured, not guessed: the table
``data/fallback_ops.json`` is written by ``tools/fallback_ops.py``, which runs each
candidate on torch_xla and reads ``torch_xla.debug.metrics.executed_fallback_ops()``.
"""

from __future__ import annotations

import ast
import json
from functools import cache
from pathlib import Path

from xlalint.analysis.semantic import dotted_name, keyword, string_value
from xlalint.engine.rule import Invalid, Rule, Valid

TABLE = Path(__file__).parent / "data" / "fallback_ops.json"
# What to write instead, where there is a lowered way (the message names it).
ALTERNATIVES = {
    "torch.bincount": "`F.one_hot(x, n).sum(0)` with a known `n` (`minlength`)",
    "torch.histc": "`F.one_hot(((x - lo) / (hi - lo) * bins).long().clamp(0, bins - 1), bins).sum(0)`",
    "torch.searchsorted": "`(sorted_seq[..., None, :] <= values[..., None]).sum(-1)` for a short sorted sequence",
    "torch.bucketize": "`(values[..., None] > boundaries).sum(-1)` for a few boundaries",
    "torch.median": "`x.sort(dim).values.select(dim, (n - 1) // 2)` (`sort` is lowered)",
    "torch.nanmedian": "`x.sort(dim).values` and a count of the non-NaN values",
    "torch.nn.functional.ctc_loss": "none lowered: compute the loss every N steps, or on the host in a step closure",
    "torch.nn.CTCLoss": "none lowered: compute the loss every N steps, or on the host in a step closure",
}
# How an op of the backward pass is marked in the merged table and the messages.
BACKWARD = " (backward)"
# The mode a function uses when the call names none (a measured form may be a mode).
DEFAULT_MODES = {"torch.nn.functional.interpolate": "nearest", "torch.nn.functional.upsample": "nearest"}
# Modules whose call runs a fallback op: they are built once and called in the step.
_MODULE_FORM = "module"


@cache
def fallback_table() -> dict:
    """The measured table (loaded once): versions and, per function, the call forms
    ("plain", "dim", "module", ...) that fell back with the aten ops that did."""
    with open(TABLE, encoding="utf-8") as file:
        return json.load(file)


@cache
def step_fallbacks() -> dict[str, dict[str, list[str]]]:
    """Per function and form, the ops that fall back in a training step: in the call,
    and in the backward of its result (``backward_fallbacks``), which the step runs too."""
    table = fallback_table()
    merged = {name: {form: list(ops) for form, ops in forms.items()} for name, forms in table["fallbacks"].items()}
    for name, forms in table.get("backward_fallbacks", {}).items():
        for form, ops in forms.items():
            known = merged.setdefault(name, {}).setdefault(form, [])
            known.extend(f"{op}{BACKWARD}" for op in ops if op not in known)
    return merged


@cache
def _by_last_name() -> dict[str, list[str]]:
    """Last name -> the table's qualified names that end with it (a cheap first test)."""
    found: dict[str, list[str]] = {}
    for qualified in step_fallbacks():
        found.setdefault(qualified.rsplit(".", 1)[-1], []).append(qualified)
    return found


class CpuFallbackOp(Rule):
    code = "XLA304"
    name = "cpu-fallback-op"
    summary = "An op torch_xla runs on the CPU, in the training step"
    fix_availability = "none"

    VALID = [
        # Lowered ops; a fallback op outside the step (before the loop).
        Valid(
            """
            import torch
            import torch.nn.functional as F
            counts = torch.bincount(dataset_labels)
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                hist = F.one_hot(y, 10).sum(0)
            """
        ),
        # A method of something that is not a tensor of the step (a NumPy array).
        Valid(
            """
            import numpy as np
            import torch
            for x, y in loader:
                loss = model(x).sum()
                loss.backward()
                spread = np.asarray(history).median()
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            for x, y in loader:
                counts = torch.bincount(y, minlength=10)
                loss = loss_fn(model(x), y, counts)
                loss.backward()
            """,
            count=1,
        ),
        # A loss module built once and called in the step; the FFT of a helper the step calls.
        Invalid(
            """
            import torch
            from torch import nn
            ctc = nn.CTCLoss()
            def spectrum(x):
                return torch.fft.rfft(x).abs()
            for x, y, xl, yl in loader:
                loss = ctc(model(spectrum(x)), y, xl, yl)
                loss.backward()
            """,
            count=2,
        ),
    ]

    @classmethod
    def _explanation(cls) -> str:
        table = fallback_table()
        rows = []
        for qualified, forms in step_fallbacks().items():
            for form, ops in forms.items():
                if not ops:
                    continue  # this form was measured lowered
                rows.append(f"| `{qualified}` | {form} | {', '.join(f'`{op}`' for op in ops)} |")
        alternatives = [f"- `{name}`: {advice}" for name, advice in ALTERNATIVES.items()]
        return f"""
## Why

An op that torch_xla does not lower to XLA runs as a *CPU fallback*: torch_xla executes
the graph built so far, copies the op's inputs to the host, runs PyTorch's CPU kernel,
copies the result back and starts a new graph. In the step that is a device-to-host round
trip and a graph cut on every step (and often a new compile when the result's shape
changes). `torch_xla.debug.metrics.executed_fallback_ops()` lists the ops that did so.

## What is flagged

In the step (the step-loop body and the same-file functions it calls; not in step
closures, not under an every-N-steps guard): a call of a function that fell back when
measured, in the same form (one argument: "plain"; a second argument or `dim=`: "dim";
a measured `mode=`, such as `F.interpolate`'s default "nearest"), as `torch.f(x)` or as
the tensor method `x.f()` on a tensor of the step, and a call of a loss module that fell
back (`nn.CTCLoss`) built in the file. The step differentiates what it computes, so an op
whose *backward* falls back counts too (marked "(backward)" below: `F.interpolate` with
`mode="nearest"` is lowered, its gradient `aten::upsample_nearest2d_backward` is not). `torch.unique` and the
other data-dependent-shape ops are XLA302's.

The list is data: `xlalint/rules/data/fallback_ops.json`, written by
`tools/fallback_ops.py`, which ran {table["candidates"]} candidates (the `torch.*`,
`torch.linalg.*`, `torch.fft.*`, `torch.special.*` and `torch.nn.functional.*` functions a
step uses, called with small tensors; {table["calls_that_ran"]} calls ran) on
torch {table["torch"]} + torch_xla {table["torch_xla"]} ({table["device"]}) and read the
fallback counters after each. These fell back:

| function | form | fallback ops |
|---|---|---|
{chr(10).join(rows)}

## Fix

None. Use a lowered alternative where there is one; otherwise move the op out of the
step (every N steps, or into `xm.add_step_closure`):

{chr(10).join(alternatives)}

## Example

```python
for x, y in loader:
    counts = torch.bincount(y, minlength=10)    # XLA304: runs on the CPU
    counts = F.one_hot(y, 10).sum(0)            # lowered
```
"""

    def finish(self) -> None:
        steps = self.ctx.steps
        if not steps.loops:
            return
        names = _by_last_name()
        modules = self._fallback_modules()
        for call in self.ctx.semantic.calls:
            func = call.func
            last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if last is None or (last not in names and not modules):
                continue
            found = self._fallback(call, last, names, modules)
            if found is None or not steps.in_step(call):
                continue
            qualified, ops = found
            if qualified.startswith("."):
                loop = steps.loop_of(call)
                if loop is None or not loop.is_tensor(func.value):  # type: ignore[attr-defined]
                    continue
                qualified = qualified[1:]
            shown = qualified.replace("torch.nn.functional.", "F.")
            table = fallback_table()
            backward_only = all(op.endswith(BACKWARD) for op in ops)
            subject = f"`{shown}`'s backward" if backward_only else f"`{shown}`"
            listed = ops[0].removesuffix(BACKWARD) if backward_only else ops[0]
            if len(ops) > 1:
                listed += f" and {len(ops) - 1} more"
            # The cost and the lowered alternative (`ALTERNATIVES`) are the explanation's.
            self.report(call, f"{subject} runs on the CPU in every step on torch_xla {table['torch_xla']} ({listed})")

    def _fallback(self, call: ast.Call, last: str, names, modules) -> tuple[str, list[str]] | None:
        """(the function's qualified name, its fallback ops) when ``call`` falls back; a
        tensor method is returned as ``.torch.f`` (the caller checks its receiver)."""
        table = step_fallbacks()
        qualified = self.ctx.semantic.call_name(call)
        if qualified in table:
            ops = _ops_of(table[qualified], _form(call, method=False, forms=table[qualified], function=qualified))
            return (qualified, ops) if ops else None
        if qualified is None and isinstance(call.func, ast.Attribute) and last in names:
            # `x.median()`: a method of a tensor with the same name as a torch function.
            function = f"torch.{last}"
            forms = table.get(function, {})
            ops = _ops_of(forms, _form(call, method=True, forms=forms, function=function))
            return (f".{function}", ops) if ops else None
        callee = dotted_name(call.func)
        if callee in modules:
            return modules[callee]
        return None

    def _fallback_modules(self) -> dict[str, tuple[str, list[str]]]:
        """Names (``ctc``, ``self.criterion``) bound to a module whose call fell back."""
        table = step_fallbacks()
        found: dict[str, tuple[str, list[str]]] = {}
        for call in self.ctx.semantic.calls:
            qualified = self.ctx.semantic.call_name(call)
            ops = table.get(qualified or "", {}).get(_MODULE_FORM)
            if not ops:
                continue
            owner = getattr(call, "parent", None)
            if isinstance(owner, ast.Assign) and len(owner.targets) == 1:
                name = dotted_name(owner.targets[0])
                if name:
                    found[name] = (qualified, ops)  # type: ignore[assignment]
        return found


def _ops_of(forms: dict[str, list[str]], form: str) -> list[str]:
    """The fallback ops of ``form``; for a form that was not measured, those of a form
    that was (`torch.fft.rfft(x, dim=-1)` falls back as `torch.fft.rfft(x)` does)."""
    if form in forms:
        return forms[form]
    return next((ops for ops in forms.values() if ops), [])


def _form(call: ast.Call, method: bool, forms: dict[str, list[str]], function: str) -> str:
    """The measured form ``call`` is: its ``mode=`` where a mode was measured (``"nearest"``,
    also as the function's default mode), else "dim" when it reduces over a given
    dimension, else "plain"."""
    mode = keyword(call, "mode")
    named = string_value(mode.value) if mode is not None else DEFAULT_MODES.get(function)
    if named in forms:
        return named
    given = len(call.args) >= (1 if method else 2) or keyword(call, "dim") is not None
    return "dim" if given else "plain"


# The explanation lists the measured table: built from it, once, when the class is made.
CpuFallbackOp.explanation = CpuFallbackOp._explanation()
