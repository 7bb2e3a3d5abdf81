"""XLA307 growing-sequence-loop: a loop that grows a device tensor with ``torch.cat``
every iteration and feeds it to a model.

Every iteration then gives the model an input one step longer: a new shape, a new
graph, a new compile, per generated token.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import ancestors, subtree
from xlalint.engine.rule import Invalid, Rule, Valid

CONCATENATE = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class GrowingSequenceLoop(Rule):
    code = "XLA307"
    name = "growing-sequence-loop"
    summary = (
        "a loop grows a tensor with `torch.cat` and feeds it to a model: one new shape, and one compile, per iteration"
    )
    explanation = """
## Why

XLA compiles one graph per input shape. A generation loop that appends each new token
to its input (`idx = torch.cat((idx, idx_next), dim=1)`) and calls the model on it
hands the model a longer tensor every iteration: every token is a new graph, compiled
before it runs. minGPT's `generate`, ported to XLA, spent 565 s compiling one graph
per token and then ran out of memory maps. Cropping the input to the context length
(`idx[:, -block_size:]`) does not help until the sequence is that long.

## What is flagged

In a file that uses torch_xla (or that the port makes one): inside a `for`/`while`
loop, `X = torch.cat((X, ...))` (also `torch.concat`, `torch.concatenate`, and
`[X, ...]`) where `X`, or a name computed from it in the loop, is passed to a model
in the same loop (a name that holds an `nn.Module`, or `self` in a module's method).
Not flagged: a loop that concatenates without calling a model on the result (data
preparation), and concatenation after the loop.

## What to do instead

No automatic fix. Keep the shape fixed: preallocate the whole sequence
(`buf = torch.zeros(b, max_len, ...)`), write each token by index
(`buf[:, t] = next_token`, or `index_copy_` with a device index) and pass the model the
fixed-length buffer with an attention mask; or run generation on the host, where
shapes cost nothing.

## Example

```python
for _ in range(max_new_tokens):
    logits = model(idx[:, -block_size:])
    idx_next = torch.multinomial(torch.softmax(logits[:, -1], -1), 1)
    idx = torch.cat((idx, idx_next), dim=1)  # XLA307
```
"""
    fix_availability = "none"

    VALID = [
        # No model call on the growing tensor: data preparation.
        Valid(
            """
            import torch
            import torch_xla
            out = torch.empty(0, 4)
            for chunk in chunks:
                out = torch.cat([out, chunk.float()])
            """
        ),
        # The model sees a fixed-shape buffer; the grown tensor is only kept.
        Valid(
            """
            import torch
            import torch_xla
            for t in range(steps):
                logits = model(buffer)
                tokens = torch.cat((tokens, logits.argmax(-1)[:, -1:]), dim=1)
                buffer[:, t] = logits.argmax(-1)[:, -1]
            """
        ),
        # No torch_xla: a CUDA/CPU script compiles nothing.
        Valid(
            """
            import torch
            for _ in range(n):
                logits = model(idx)
                idx = torch.cat((idx, logits[:, -1:].argmax(-1)), dim=1)
            """
        ),
    ]

    INVALID = [
        # minGPT's generate, in the model class itself.
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torch_xla

            class GPT(nn.Module):
                @torch.no_grad()
                def generate(self, idx, max_new_tokens):
                    for _ in range(max_new_tokens):
                        idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
                        logits, _ = self(idx_cond)
                        probs = torch.softmax(logits[:, -1, :], dim=-1)
                        idx_next = torch.multinomial(probs, num_samples=1)
                        idx = torch.cat((idx, idx_next), dim=1)
                    return idx
            """,
            count=1,
        ),
        # A while loop and a model held by a variable.
        Invalid(
            """
            import torch
            import torch_xla
            model = torch.nn.Linear(4, 4).to(torch_xla.device())
            while x.shape[0] < 64:
                y = model(x)
                x = torch.concat([x, y[-1:]])
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.distributed.uses_xla:
            return
        fed_by_loop: dict[int, frozenset[str]] = {}
        for call in self.ctx.semantic.calls_of("cat", "concat", "concatenate"):
            grown = _grown_name(call)
            if grown is None or self.ctx.semantic.call_name(call) not in CONCATENATE:
                continue
            loop = _enclosing_loop(call)
            if loop is None:
                continue
            if id(loop) not in fed_by_loop:
                fed_by_loop[id(loop)] = self._names_fed_to_a_model(loop)
            if grown in fed_by_loop[id(loop)]:
                self.report(
                    call,
                    f"`{grown}` grows every iteration and is fed to a model: a new shape and a compile per iteration",
                )

    def _names_fed_to_a_model(self, loop: ast.AST) -> frozenset[str]:
        """The local names whose values reach a model call in ``loop``'s body: the
        arguments of the call, and the names that assignments in the loop compute them
        from (one pass backward over the body, then once more for what a later
        iteration carries)."""
        body = [node for stmt in _bodies(loop) for node in subtree(stmt)]
        fed: set[str] = set()
        for node in body:
            if isinstance(node, ast.Call) and self._calls_a_model(node):
                for argument in [*node.args, *(kw.value for kw in node.keywords)]:
                    fed.update(_names_in(argument))
        assignments = sorted((node for node in body if isinstance(node, ast.Assign)), key=lambda node: node.lineno)
        for _ in range(2):
            for assignment in reversed(assignments):
                if any(isinstance(target, ast.Name) and target.id in fed for target in assignment.targets):
                    fed.update(_names_in(assignment.value))
        return frozenset(fed)

    def _calls_a_model(self, call: ast.Call) -> bool:
        func = call.func
        if isinstance(func, ast.Name) and func.id == "self":
            return True
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        return self.ctx.steps.is_module(func)


def _grown_name(call: ast.Call) -> str | None:
    """``X`` of ``X = torch.cat((X, ...))``: the call's result replaces a tensor it
    concatenates onto."""
    statement = next(ancestors(call), None)
    if not isinstance(statement, ast.Assign) or statement.value is not call or len(statement.targets) != 1:
        return None
    target = statement.targets[0]
    if not isinstance(target, ast.Name) or not call.args or not isinstance(call.args[0], (ast.Tuple, ast.List)):
        return None
    parts = call.args[0].elts
    return target.id if any(isinstance(part, ast.Name) and part.id == target.id for part in parts) else None


def _enclosing_loop(node: ast.AST) -> ast.AST | None:
    for ancestor in ancestors(node):
        if isinstance(ancestor, _LOOPS):
            return ancestor
        if isinstance(ancestor, _SCOPES):
            return None
    return None


def _bodies(loop: ast.AST) -> list[ast.stmt]:
    statements = list(loop.body)  # type: ignore[attr-defined]
    if isinstance(loop, ast.While):
        statements.insert(0, ast.Expr(loop.test))
    return statements


def _names_in(expr: ast.AST) -> set[str]:
    return {node.id for node in subtree(expr) if isinstance(node, ast.Name)}
