"""XLA309 inference-mode-on-xla: ``torch.inference_mode()`` in an XLA script.

On torch_xla 2.9 a tensor made inside ``inference_mode`` cannot go through the model
again: the XLA tensor implementation sets a version counter that inference tensors do
not have. ``torch.no_grad()`` turns off gradients the same way and runs.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import keyword
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import ReplaceExpr

INFERENCE_MODE = frozenset(
    {"torch.inference_mode", "torch.autograd.inference_mode", "torch.autograd.grad_mode.inference_mode"}
)
FIX_MESSAGE = "Use `torch.no_grad()`"


class InferenceModeOnXla(Rule):
    code = "XLA309"
    name = "inference-mode-on-xla"
    summary = "`torch.inference_mode()` in an XLA script: a model applied to its own output inside it crashes"
    explanation = """
## Why

On torch_xla 2.9.0 a tensor created inside `torch.inference_mode()` cannot be fed
through the model a second time: the XLA tensor implementation sets a version counter,
which inference tensors do not have, and the call fails with
`RuntimeError: Cannot set version_counter for inference tensor` (measured on CPU: a
two-layer MLP applied to its own output inside `inference_mode` is enough). Sampling
loops do exactly that (a diffusion sampler, autoregressive generation): a port that
trained correctly dies at its first sampling step. `torch.no_grad()` turns off
gradient recording the same way and runs.

## What is flagged

In a file that uses torch_xla (or that the port makes one), and in a local module that
such a script imports (the sampler of a diffusion project, checked with the script:
`xlalint check train.py` follows its imports): `torch.inference_mode()`
(also `torch.autograd.inference_mode`, and `from torch import inference_mode`) used as
a context manager (`with torch.inference_mode():`) or as a decorator
(`@torch.inference_mode()` or bare `@torch.inference_mode`). Not flagged:
`inference_mode(False)` / `inference_mode(mode=False)`, which turns inference mode off.
A mode chosen by a variable is reported without a fix (`no_grad()` would be wrong when
it is `False`).

## Fix

safe: `torch.no_grad()`. Gradients are off in both; what is lost are only the extra
checks of inference tensors (an inference tensor cannot be used later in autograd),
which a script that ran under `inference_mode` never relied on.

## Example

```python
with torch.inference_mode():
    x = model(model(x))
```
becomes
```python
with torch.no_grad():
    x = model(model(x))
```
"""
    fix_availability = "safe"

    VALID = [
        Valid(
            """
            import torch
            import torch_xla
            with torch.no_grad():
                y = model(model(x))
            """
        ),
        # A CUDA or CPU script: inference_mode works there.
        Valid(
            """
            import torch
            with torch.inference_mode():
                y = model(model(x))
            """
        ),
        # Inference mode turned off.
        Valid(
            """
            import torch
            import torch_xla
            with torch.inference_mode(False):
                y = model(x)
            with torch.inference_mode(mode=False):
                y = model(x)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            with torch.inference_mode():
                y = model(model(x))
            """,
            fixed="""
            import torch
            import torch_xla
            with torch.no_grad():
                y = model(model(x))
            """,
            count=1,
        ),
        # The decorator, called and bare; `mode=True` spelled out.
        Invalid(
            """
            import torch
            import torch_xla

            @torch.inference_mode()
            def sample(model, x):
                return model(model(x))

            @torch.inference_mode
            def evaluate(model, x):
                return model(x)

            @torch.inference_mode(mode=True)
            def score(model, x):
                return model(x)
            """,
            fixed="""
            import torch
            import torch_xla

            @torch.no_grad()
            def sample(model, x):
                return model(model(x))

            @torch.no_grad()
            def evaluate(model, x):
                return model(x)

            @torch.no_grad()
            def score(model, x):
                return model(x)
            """,
            count=3,
        ),
        # Imported by name: the import goes with the fix.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            from torch import inference_mode
            with inference_mode():
                y = model(x)
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm

            with torch.no_grad():
                y = model(x)
            """,
            count=1,
        ),
        # The mode comes from a variable: reported, no fix.
        Invalid(
            """
            import torch
            import torch_xla
            with torch.inference_mode(args.inference):
                y = model(x)
            """,
            fixed=None,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.in_xla_program:
            return
        semantic = self.ctx.semantic
        for with_node in semantic.nodes_of(ast.With, ast.AsyncWith):
            for item in with_node.items:
                self._check(item.context_expr)
        for function in semantic.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):
            for decorator in function.decorator_list:
                self._check(decorator)

    def _check(self, expr: ast.expr) -> None:
        """``expr`` (a context manager or a decorator) enters inference mode."""
        semantic = self.ctx.semantic
        func = expr.func if isinstance(expr, ast.Call) else expr
        if not isinstance(func, (ast.Name, ast.Attribute)) or semantic.qualified_name(func) not in INFERENCE_MODE:
            return
        mode = _mode(expr) if isinstance(expr, ast.Call) else True
        if mode is False:
            return
        if mode is None:
            self.report(
                expr,
                "`torch.inference_mode()` with a mode chosen at run time, in an XLA script: "
                "a model applied to its own output crashes",
            )
            return
        torch, imports = self.ctx.reference("torch", at=expr)
        binding = semantic.imports.import_binding(func)
        fix = self.fix(
            "safe",
            FIX_MESSAGE,
            ReplaceExpr(self.ctx.span(expr), f"{torch}.no_grad()"),
            imports=imports,
            unused_imports=(binding,) if binding is not None else (),
        )
        self.report(expr, fix=fix)


def _mode(call: ast.Call) -> bool | None:
    """The ``mode`` an ``inference_mode(...)`` call is given: True by default, the
    literal when it is one, None when it is computed (or passed in ``*args``/``**kwargs``)."""
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(kw.arg is None for kw in call.keywords):
        return None
    given = call.args[0] if call.args else getattr(keyword(call, "mode"), "value", None)
    if given is None:
        return True
    if isinstance(given, ast.Constant) and isinstance(given.value, bool):
        return given.value
    return None
