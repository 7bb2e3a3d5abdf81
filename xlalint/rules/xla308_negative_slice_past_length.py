"""XLA308 negative-slice-past-length: ``t[:, -k:]`` of a device tensor that can be
shorter than ``k``.

CPU and CUDA clamp a slice start that lies before the first element; torch_xla 2.9
raises instead. The common case is the crop of nanoGPT-style sampling,
``idx[:, -block_size:]``, on a sequence that grows from a prompt shorter than the
context.
"""

from __future__ import annotations

import ast

from xlalint.analysis.growing import Growth, literal_int
from xlalint.analysis.semantic import ancestors, method_name, parent, subtree
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import ReplaceExpr

FIX_MESSAGE = "Crop only when the tensor is longer than the window"
# black's and ruff's default line length: a longer fixed assignment is laid out as they would.
LINE_LENGTH = 88
# Where a conditional expression needs no parentheses.
_BARE_EXPRESSION_PARENTS = (ast.Assign, ast.AnnAssign, ast.Return, ast.keyword, ast.Expr)


class NegativeSlicePastLength(Rule):
    code = "XLA308"
    name = "negative-slice-past-length"
    summary = "a negative slice start `t[:, -k:]` of a tensor that can be shorter than `k`: torch_xla raises"
    explanation = """
## Why

On CPU and CUDA a slice whose negative start lies before the first element is clamped:
`idx[:, -8:]` of a `(1, 3)` tensor is the whole tensor. torch_xla 2.9 does not clamp
it: the slice raises `RuntimeError: Value out of range (expected to be in range of
[-3, 2], but got -8)` (measured on torch_xla 2.9.0 CPU). The crop of GPT-style
sampling, `idx[:, -block_size:]` on a sequence that grows from a one-token prompt,
does exactly that: a port that trained correctly on XLA dies in its sampling code
(two of five ported repositories did).

## What is flagged

In a file that uses torch_xla (or that the port makes one), and in a local module that
such a script imports (checked with it: `xlalint check train.py` follows its imports to
the `model.py` that holds `generate`): a slice with a negative
start and no end, `t[..., -k:]` (`k` a name, an attribute or a literal above 1), of a
tensor that the same loop grows with `torch.cat` and passes to a model (as XLA307
finds them), along the dimension it grows. Not flagged: a tensor whose length is not
known to change (a preallocated buffer, a slice of a fixed-shape batch), a slice along
another dimension, `t[:, -1:]`, and a crop already guarded by the tensor's length
(`idx if idx.size(1) <= block_size else idx[:, -block_size:]`, nanoGPT's own).

## Fix

unsafe: crop only when the tensor is longer than the window:
`idx if idx.size(1) <= block_size else idx[:, -block_size:]`, the same values as the
clamped slice on CPU. The length test runs on the host (shapes are static on XLA), so
it adds no device work; each length below the window is still its own graph until the
sequence reaches the window (XLA307).

## Example

```python
for _ in range(max_new_tokens):
    idx_cond = idx[:, -block_size:]
    logits, _ = model(idx_cond)
    idx = torch.cat((idx, torch.multinomial(logits[:, -1].softmax(-1), 1)), dim=1)
```
becomes
```python
for _ in range(max_new_tokens):
    idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
    ...
```
"""
    fix_availability = "unsafe"

    VALID = [
        # nanoGPT's crop: guarded by the length.
        Valid(
            """
            import torch
            import torch_xla
            for _ in range(n):
                idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
                logits = model(idx_cond)
                idx = torch.cat((idx, logits[:, -1:].argmax(-1)), dim=1)
            """
        ),
        # A fixed-shape batch: its length does not change.
        Valid(
            """
            import torch
            import torch_xla
            for x, y in loader:
                context = x[:, -block_size:]
                loss = model(context, y)
            """
        ),
        # Only the last token, and a slice along the batch dimension.
        Valid(
            """
            import torch
            import torch_xla
            for _ in range(n):
                logits = model(idx[:, -1:])
                keep = idx[-4:]
                idx = torch.cat((idx, logits.argmax(-1)), dim=1)
            """
        ),
        # A CUDA or CPU script: the slice is clamped there.
        Valid(
            """
            import torch
            for _ in range(n):
                logits = model(idx[:, -block_size:])
                idx = torch.cat((idx, logits[:, -1:].argmax(-1)), dim=1)
            """
        ),
    ]

    INVALID = [
        # The GPT lecture script's generate.
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torch_xla

            class BigramLanguageModel(nn.Module):
                def generate(self, idx, max_new_tokens):
                    for _ in range(max_new_tokens):
                        idx_cond = idx[:, -block_size:]
                        logits, loss = self(idx_cond)
                        probs = torch.softmax(logits[:, -1, :], dim=-1)
                        idx_next = torch.multinomial(probs, num_samples=1)
                        idx = torch.cat((idx, idx_next), dim=1)
                    return idx
            """,
            fixed=None,
            unsafe_fixed="""
            import torch
            import torch.nn as nn
            import torch_xla

            class BigramLanguageModel(nn.Module):
                def generate(self, idx, max_new_tokens):
                    for _ in range(max_new_tokens):
                        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
                        logits, loss = self(idx_cond)
                        probs = torch.softmax(logits[:, -1, :], dim=-1)
                        idx_next = torch.multinomial(probs, num_samples=1)
                        idx = torch.cat((idx, idx_next), dim=1)
                    return idx
            """,
            count=1,
        ),
        # The crop passed straight to the model, a window from the config, the last dimension.
        Invalid(
            """
            import torch
            import torch_xla
            while tokens.size(-1) < limit:
                logits = model(tokens[..., -cfg.context:].to(device))
                tokens = torch.cat([tokens, logits[..., -1:].argmax(-1)], dim=-1)
            """,
            fixed=None,
            unsafe_fixed="""
            import torch
            import torch_xla
            while tokens.size(-1) < limit:
                logits = model((tokens if tokens.size(-1) <= cfg.context else tokens[..., -cfg.context:]).to(device))
                tokens = torch.cat([tokens, logits[..., -1:].argmax(-1)], dim=-1)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.in_xla_program or not self.ctx.growing.growths:
            return
        for subscript in self.ctx.semantic.nodes_of(ast.Subscript):
            if not isinstance(subscript.value, ast.Name):
                continue
            crop = _negative_crop(subscript)
            if crop is None:
                continue
            dim, window = crop
            name = subscript.value.id
            growth = self.ctx.growing.growing_at(subscript, name)
            if growth is None or not _same_dim(growth, dim) or _guarded_by_length(subscript, name, growth.loop):
                continue
            self.report(subscript, self._message(name, window), fix=self._fix(subscript, dim, window))

    def _message(self, name: str, window: ast.expr) -> str:
        window_text = " ".join(self.ctx.source_of(window).split())
        return f"`{name}` grows in this loop: while shorter than `{window_text}`, the crop raises on torch_xla"

    def _fix(self, subscript: ast.Subscript, dim: int, window: ast.expr):
        whole, tensor, size = (self.ctx.span(node) for node in (subscript, subscript.value, window))
        template = f"{{tensor}} if {{tensor}}.size({dim}) <= {{size}} else {{whole}}"
        holder = parent(subscript)
        if isinstance(holder, (ast.Assign, ast.AnnAssign)) and self._too_long(subscript, window, dim):
            # As a formatter lays out a long value: in parentheses, on a line of its own
            # (the lines of the template are indented as the statement is).
            template = f"(\n    {template}\n)"
        elif not isinstance(holder, _BARE_EXPRESSION_PARENTS) and not _is_argument(subscript):
            template = f"({template})"
        operation = ReplaceExpr(whole, template, (("tensor", tensor), ("size", size), ("whole", whole)))
        return self.fix("unsafe", FIX_MESSAGE, operation)

    def _too_long(self, subscript: ast.Subscript, window: ast.expr, dim: int) -> bool:
        """The fixed line would pass the formatters' default line length."""
        line = self.ctx.lines[subscript.lineno - 1]
        added = _rendered_growth(self.ctx.source_of(subscript.value), self.ctx.source_of(window), dim)
        return subscript.end_lineno == subscript.lineno and len(line.rstrip()) + added > LINE_LENGTH


def _rendered_growth(tensor: str, size: str, dim: int) -> int:
    """How many characters the fix adds before the slice: ``t if t.size(d) <= k else ``."""
    return len(f"{tensor} if {tensor}.size({dim}) <= {size} else ")


def _negative_crop(subscript: ast.Subscript) -> tuple[int, ast.expr] | None:
    """``t[..., -k:]``: the dimension sliced (negative when counted from the end, after an
    ``...``) and ``k``; None for any other subscript, for ``-1:`` and for a slice with an
    end or a step."""
    parts = subscript.slice.elts if isinstance(subscript.slice, ast.Tuple) else [subscript.slice]
    crops = [i for i, part in enumerate(parts) if _is_negative_start(part)]
    if len(crops) != 1 or any(isinstance(p, ast.Constant) and p.value is None for p in parts):
        return None
    position = crops[0]
    ellipsis = [i for i, p in enumerate(parts) if isinstance(p, ast.Constant) and p.value is Ellipsis]
    dim = position - len(parts) if ellipsis and ellipsis[0] < position else position
    return dim, parts[position].lower.operand  # type: ignore[attr-defined]


def _is_negative_start(part: ast.expr) -> bool:
    if not isinstance(part, ast.Slice) or part.upper is not None or part.step is not None:
        return False
    lower = part.lower
    if not isinstance(lower, ast.UnaryOp) or not isinstance(lower.op, ast.USub):
        return False
    if not isinstance(lower.operand, (ast.Name, ast.Attribute, ast.Constant)):
        return False
    if isinstance(lower.operand, ast.Constant):
        # `-1:` keeps the last element, which a non-empty tensor always has.
        literal = literal_int(lower.operand)
        return literal is not None and literal > 1
    return True


def _same_dim(growth: Growth, dim: int) -> bool:
    """The slice is along the dimension the tensor grows (or the two cannot be told apart:
    one counted from the front, the other from the end)."""
    if growth.dim is None or (growth.dim < 0) != (dim < 0):
        return True
    return growth.dim == dim


def _guarded_by_length(subscript: ast.Subscript, name: str, loop: ast.AST) -> bool:
    """The slice runs only when a test of ``name``'s length says so: the ``else`` of
    ``idx if idx.size(1) <= k else idx[:, -k:]``, or under ``if idx.size(1) > k:``."""
    child: ast.AST = subscript
    for ancestor in ancestors(subscript):
        if ancestor is loop:
            return False
        if (
            isinstance(ancestor, (ast.IfExp, ast.If))
            and child is not ancestor.test
            and _reads_length(ancestor.test, name)
        ):
            return True
        child = ancestor
    return False


def _reads_length(test: ast.expr, name: str) -> bool:
    for node in subtree(test):
        if isinstance(node, ast.Call) and method_name(node) == "size" and _is_name(node.func.value, name):  # type: ignore[attr-defined]
            return True
        if isinstance(node, ast.Attribute) and node.attr == "shape" and _is_name(node.value, name):
            return True
        if isinstance(node, ast.Call) and _is_name(node.func, "len") and node.args and _is_name(node.args[0], name):
            return True
    return False


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_argument(node: ast.AST) -> bool:
    """``node`` is a positional argument of a call (not the called expression)."""
    holder = parent(node)
    return isinstance(holder, ast.Call) and node is not holder.func
