"""XLA302 dynamic-shape-op: an op whose output shape depends on the data, in the step."""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import enclosing_function, method_name, subtree
from xlalint.analysis.steps import StepLoop
from xlalint.engine.rule import Invalid, Rule, Valid

# torch functions whose result has a data-dependent shape, and what they compute.
DYNAMIC_FUNCTIONS = {
    "torch.nonzero": "nonzero",
    "torch.argwhere": "argwhere",
    "torch.masked_select": "masked_select",
    "torch.unique": "unique",
    "torch.unique_consecutive": "unique_consecutive",
}
DYNAMIC_METHODS = frozenset(DYNAMIC_FUNCTIONS.values())
# Functions and methods that build a boolean mask from tensors.
MASK_FUNCTIONS = frozenset(
    {
        "torch.logical_and",
        "torch.logical_or",
        "torch.logical_not",
        "torch.logical_xor",
        "torch.isnan",
        "torch.isinf",
        "torch.isfinite",
        "torch.isin",
        "torch.eq",
        "torch.ne",
        "torch.gt",
        "torch.ge",
        "torch.lt",
        "torch.le",
    }
)
MASK_METHODS = frozenset(
    {
        "bool",
        "eq",
        "ne",
        "gt",
        "ge",
        "lt",
        "le",
        "isnan",
        "isinf",
        "isfinite",
        "logical_not",
        "logical_and",
        "logical_or",
    }
)
# The message says what happens; the explanation says why it costs and what to use instead.
_WHY = "has a data-dependent output shape: torch_xla computes it on the CPU in every step"
_ADVICE = "use `torch.where(cond, a, b)`, `masked_fill`, or arithmetic with a fixed-size mask (`(x * mask).sum()`)"


class DynamicShapeOp(Rule):
    code = "XLA302"
    name = "dynamic-shape-op"
    summary = "an op whose output shape depends on the data, in the training step"
    fix_availability = "none"
    explanation = f"""
## Why
XLA compiles a graph for fixed shapes. `nonzero`, `masked_select`, boolean-mask
indexing (`x[x > 0]`), `unique` and one-argument `torch.where(cond)` return as many
elements as the data says. torch_xla 2.9 runs them as CPU fallbacks (`aten::nonzero`,
`aten::_unique2` in its metrics): it executes the graph built so far, copies the
input to the host, computes there and copies the result back, in the middle of every
step, and each new result size changes the shapes of the graph that follows (new
compilations). Measured on torch_xla 2.9 CPU, four steps with a `nonzero`, a mask
index and a `unique` each: 16 executions instead of 4, 12 device-to-host transfers.

## What is flagged
In the step (the step-loop body and the same-file functions it calls; not in step
closures, not under an every-N-steps guard, not after the loop):
`torch.nonzero`/`.nonzero()`, `torch.argwhere`, `torch.masked_select`/`.masked_select()`,
`torch.unique`/`.unique()`, `torch.unique_consecutive`, `torch.where(cond)` with a
single argument, and reading a tensor through a boolean mask built from a comparison
(`x[x > 0]`, `logits[labels != -100]`, `x[:, mask]` where `mask = y > 0`, `~m`, `m1 & m2`).
Writing through such a mask (`x[x < 0] = 0`) too: torch_xla 2.9 runs it through
`aten::nonzero` on the CPU as well (use `x.masked_fill_(x < 0, 0)`). Method calls are
flagged when the step analysis knows the receiver is a tensor.

## Fix
None: the rewrite depends on what the result is used for. Keep shapes static:
{_ADVICE}. A masked mean, for instance, is `(loss * mask).sum() / mask.sum()`
instead of `loss[mask].mean()`.

## Example
```python
for x, y in loader:
    loss = loss_fn(model(x), y)
    loss = loss[y != -100].mean()                          # XLA302
    # instead
    mask = (y != -100).float()
    loss = (loss * mask).sum() / mask.sum()
```
"""

    VALID = [
        Valid(
            """
            import torch
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = loss_fn(model(x), y)
                mask = (y != -100).float()
                loss = (loss * mask).sum() / mask.sum()
                clipped = torch.where(x > 0, x, torch.zeros_like(x))
                x = x.masked_fill(x < 0, 0)
                loss.backward()
            """
        ),
        # Outside the step: before/after the loop, in an evaluation loop, under an every-N guard.
        Valid(
            """
            import torch
            labels = torch.unique(dataset.targets)
            for step, (x, y) in enumerate(loader):
                x, y = x.to(device), y.to(device)
                loss = loss_fn(model(x), y)
                loss.backward()
                if step % 100 == 0:
                    print((y > 0).nonzero().shape)
            with torch.no_grad():
                for x, y in val_loader:
                    preds = model(x.to(device))
                    correct = preds[preds.argmax(-1) == y.to(device)]
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                logits = model(x)
                active = logits[y != -100]
                idx = torch.nonzero(y)
                picked = torch.masked_select(logits, y > 0)
                classes = y.unique()
                rows = torch.where(y > 0)
                loss = loss_fn(active, y[y != -100])
                logits[logits < 0] = 0
                loss.backward()
            """,
            count=7,
        ),
        # In a helper the loop calls, through a mask variable, and `.nonzero()` on a comparison.
        Invalid(
            """
            import torch
            def train_step(model, batch):
                ids = batch["input_ids"].to(device)
                keep = (ids != pad_id) & (ids != cls_id)
                out = model(ids)
                hidden = out[:, keep]
                first = (ids == sep_id).nonzero()
                out.sum().backward()
            for batch in loader:
                train_step(model, batch)
            """,
            count=2,
        ),
    ]

    def begin(self) -> None:
        self._assignments: dict[int, dict[str, list[ast.expr]]] = {}
        if not self.ctx.steps.loops:
            self.skipped_visits |= {ast.Call, ast.Subscript}  # no step for an op to run in

    def visit_Call(self, node: ast.Call) -> None:
        steps = self.ctx.steps
        if not steps.loops:
            return
        what = self._dynamic_call(node)
        if what is None or not steps.in_step(node):
            return
        if what.startswith("."):
            # A method: only on a tensor the step produces (not a NumPy array or a list).
            loop = steps.loop_of(node)
            if loop is None or not loop.is_tensor(node.func.value):  # type: ignore[union-attr]
                return
        self.report(node, f"`{what}` {_WHY}")

    def visit_Subscript(self, node: ast.Subscript) -> None:
        steps = self.ctx.steps
        if not steps.loops:
            return
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        masks = [index for index in indices if self._is_mask(index)]
        if not masks or not steps.in_step(node):
            return
        loop = steps.loop_of(node)
        if loop is None or not (loop.is_tensor(node.value) or any(self._mask_of_tensor(m, loop) for m in masks)):
            return
        if isinstance(node.ctx, ast.Load):
            self.report(node, f"Boolean-mask indexing {_WHY}")
        else:
            # `x[mask] = v` is an index_put through `nonzero`: the same CPU fallback.
            self.report(
                node,
                "Assigning through a boolean mask runs `nonzero` on the CPU in every step",
            )

    # -- what the node computes -----------------------------------------------------------
    def _dynamic_call(self, call: ast.Call) -> str | None:
        """The name of the dynamic-shape op ``call`` performs, if any."""
        qualified = self.ctx.semantic.call_name(call)
        if qualified is not None:
            if qualified in DYNAMIC_FUNCTIONS:
                return qualified
            if qualified == "torch.where" and len(call.args) + len(call.keywords) == 1:
                return "torch.where(cond)"
            return None
        attr = method_name(call)
        return f".{attr}()" if attr in DYNAMIC_METHODS else None

    def _is_mask(self, node: ast.AST, depth: int = 0) -> bool:
        """A boolean mask built from a comparison: ``x > 0``, ``~m``, ``a & b``,
        ``torch.isnan(x)``, ``(x == y).bool()``, or a name assigned one in this scope."""
        if depth > 4:
            return False
        if isinstance(node, ast.Compare):
            return not any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self._is_mask(node.operand, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return self._is_mask(node.left, depth + 1) or self._is_mask(node.right, depth + 1)
        if isinstance(node, ast.Call):
            if self.ctx.semantic.call_name(node) in MASK_FUNCTIONS:
                return True
            return method_name(node) in MASK_METHODS and self.ctx.semantic.call_name(node) is None
        if isinstance(node, ast.Name):
            return any(self._is_mask(value, depth + 1) for value in self._assigned(node))
        return False

    def _mask_of_tensor(self, mask: ast.AST, loop: StepLoop) -> bool:
        if isinstance(mask, ast.Name):
            return any(loop.is_tensor(value) for value in self._assigned(mask))
        return loop.is_tensor(mask)

    def _assigned(self, name: ast.Name) -> list[ast.expr]:
        """Values assigned to ``name`` by plain assignments in its function (or the module)."""
        scope: ast.AST = enclosing_function(name) or self.ctx.tree
        found = self._assignments.get(id(scope))
        if found is None:
            found = self._assignments[id(scope)] = _assignments(scope)
        return found.get(name.id, [])


def _assignments(scope: ast.AST) -> dict[str, list[ast.expr]]:
    """The values plain assignments in ``scope`` (nested definitions included) give each
    name, in no promised order (one walk per scope, not one per use)."""
    found: dict[str, list[ast.expr]] = {}
    for stmt in subtree(scope):
        if isinstance(stmt, ast.Assign):
            for target in dict.fromkeys(t.id for t in stmt.targets if isinstance(t, ast.Name)):
                found.setdefault(target, []).append(stmt.value)
        elif (
            isinstance(stmt, (ast.AnnAssign, ast.NamedExpr))
            and isinstance(stmt.target, ast.Name)
            and stmt.value is not None
        ):
            found.setdefault(stmt.target.id, []).append(stmt.value)
    return found
