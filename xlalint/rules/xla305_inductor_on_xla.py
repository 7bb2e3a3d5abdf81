"""XLA305 inductor-on-xla: ``torch.compile`` with its default backend in an XLA script.

``torch.compile``'s default backend, Inductor, generates code for CPU and CUDA tensors
only: given a model on the XLA device it fails while lowering the graph. The dynamo
backend that compiles through XLA is ``"openxla"``.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import keyword, string_value
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import ReplaceExpr, SetKeyword

TORCH_COMPILE = frozenset({"torch.compile"})
INDUCTOR = "inductor"
XLA_BACKEND = "openxla"
FIX_MESSAGE = f'compile with `backend="{XLA_BACKEND}"`'
# TorchTPU wraps `torch.compile`: no backend compiles for the TPU; an explicit "inductor"
# raises (torch-tpu 0.2.0, `torch_tpu/_loader.py`) unless `options={"tpu_backend": ...}`.
TPU_BACKEND = "tpu"
TPU_MESSAGE = f'TorchTPU raises on `torch.compile(..., backend="inductor")`: use `backend="{TPU_BACKEND}"`'


class InductorOnXla(Rule):
    code = "XLA305"
    name = "inductor-on-xla"
    summary = '`torch.compile` with the Inductor backend in an XLA script: use `backend="openxla"`'
    explanation = """
## Why

`torch.compile(model)` uses Inductor unless told otherwise, and Inductor cannot compile
XLA tensors: the first call of the compiled model fails while lowering the graph
(measured on torch_xla 2.9.0 CPU: `InductorError: KeyError: 'xla'`; in llama2.c's
`train.py` a `LoweringException`, before and after the port). torch_xla's dynamo
backend is `"openxla"`: `torch.compile(model, backend="openxla")` traces the model
once and runs the graph through XLA.

## What is flagged

In a file that uses torch_xla (or that the port makes one), `torch.compile(...)` with
no `backend=` or with `backend="inductor"`, and a bare `@torch.compile` decorator.
Not flagged: another backend, a backend chosen by a variable, `disable=True`, and a
call that passes `**kwargs` (the backend may be in them).

## Fix

unsafe: `backend="openxla"` (the openxla backend is experimental in torch_xla 2.9 and
compiles differently: check the results). Inductor's `mode=`/`options=` are kept; the
openxla backend ignores them with a warning. Where a flag of the user chooses the
compile (`if args.compile: model = torch.compile(model)`), the flag stays as it is.

## Example

```python
model = torch.compile(model)
```
becomes
```python
model = torch.compile(model, backend="openxla")
```
"""
    fix_availability = "unsafe"

    VALID = [
        Valid(
            """
            import torch
            import torch_xla
            model = torch.compile(model, backend="openxla")
            """
        ),
        # A CUDA or CPU script: Inductor is the right default there.
        Valid(
            """
            import torch
            model = torch.compile(model)
            """
        ),
        # The user's own choice of backend, read from the command line.
        Valid(
            """
            import torch
            import torch_xla
            model = torch.compile(model, backend=args.backend)
            """
        ),
        # Compilation turned off; and keywords passed on whole.
        Valid(
            """
            import torch
            import torch_xla
            a = torch.compile(model, disable=True)
            b = torch.compile(model, **compile_kwargs)
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            if args.compile:
                model = torch.compile(model)
            """,
            fixed=None,
            unsafe_fixed="""
            import torch
            import torch_xla
            if args.compile:
                model = torch.compile(model, backend="openxla")
            """,
            count=1,
        ),
        # Inductor named; its mode is kept.
        Invalid(
            """
            import torch as T
            import torch_xla.core.xla_model as xm
            step = T.compile(train_step, backend="inductor", mode="max-autotune")
            """,
            fixed=None,
            unsafe_fixed="""
            import torch as T
            import torch_xla.core.xla_model as xm
            step = T.compile(train_step, backend="openxla", mode="max-autotune")
            """,
            count=1,
        ),
        # The bare decorator.
        Invalid(
            """
            import torch
            import torch_xla

            @torch.compile
            def loss_fn(model, x, y):
                return torch.nn.functional.cross_entropy(model(x), y)
            """,
            fixed=None,
            unsafe_fixed="""
            import torch
            import torch_xla

            @torch.compile(backend="openxla")
            def loss_fn(model, x, y):
                return torch.nn.functional.cross_entropy(model(x), y)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if self.ctx.on_torch_tpu:
            self._named_inductor_on_tpu()
            return
        if not self.ctx.distributed.uses_xla:
            return
        semantic = self.ctx.semantic
        for call in semantic.calls_of("compile"):
            if semantic.call_name(call) in TORCH_COMPILE and _uses_inductor(call):
                operation = SetKeyword(self.ctx.span(call), "backend", f'"{XLA_BACKEND}"')
                self.report(call, fix=self.fix("unsafe", FIX_MESSAGE, operation))
        for function in semantic.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef):
            for decorator in function.decorator_list:
                # `@torch.compile` with no call: the decorator form of the default backend.
                if (
                    isinstance(decorator, (ast.Name, ast.Attribute))
                    and semantic.qualified_name(decorator) in TORCH_COMPILE
                ):
                    span = self.ctx.span(decorator)
                    operation = ReplaceExpr(span, f'{{decorator}}(backend="{XLA_BACKEND}")', (("decorator", span),))
                    self.report(decorator, fix=self.fix("unsafe", FIX_MESSAGE, operation))

    def _named_inductor_on_tpu(self) -> None:
        semantic = self.ctx.semantic
        for call in semantic.calls_of("compile"):
            backend = keyword(call, "backend")
            if (
                semantic.call_name(call) in TORCH_COMPILE
                and backend is not None
                and string_value(backend.value) == INDUCTOR
                and keyword(call, "options") is None
            ):
                operation = SetKeyword(self.ctx.span(call), "backend", f'"{TPU_BACKEND}"')
                self.report(call, TPU_MESSAGE, self.fix("unsafe", f'compile with `backend="{TPU_BACKEND}"`', operation))


def _uses_inductor(call: ast.Call) -> bool:
    """The call compiles with Inductor: no backend given (and none hidden in ``**kwargs``),
    or ``"inductor"`` by name; not when compilation is disabled outright."""
    if any(kw.arg is None for kw in call.keywords):
        return False
    disable = keyword(call, "disable")
    if disable is not None and isinstance(disable.value, ast.Constant) and disable.value.value is True:
        return False
    backend = keyword(call, "backend")
    return backend is None or string_value(backend.value) == INDUCTOR
