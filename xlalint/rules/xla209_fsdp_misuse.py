"""XLA209 fsdp-misuse: a model wrapped in torch_xla's FSDP, trained as if it were not.

``XlaFullyShardedDataParallel`` shards the parameters in place and reduce-scatters the
gradients in backward. Its own docstring (torch_xla 2.9,
``torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py``) warns against the
three mistakes flagged here: stepping with ``xm.optimizer_step`` (which all-reduces the
gradients again), building the optimizer before the wrap (it then holds the unsharded
parameters), and ``torch.nn.utils.clip_grad_norm_`` (the norm of one process's shard).
"""

from __future__ import annotations

import ast

from xlalint.analysis.optimizer_place import build_after_wrap
from xlalint.analysis.own_step import own_step_fix, stepped_optimizer
from xlalint.analysis.parallelism import XLA_FSDP_KINDS, Wrap, WrapKind
from xlalint.analysis.semantic import dotted_name, enclosing_function, keyword_value
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import Fix, ReplaceExpr

OPTIMIZER_STEP = frozenset({"torch_xla.core.xla_model.optimizer_step"})
CLIP_GRAD_NORM = frozenset({"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_"})


class FsdpMisuse(Rule):
    code = "XLA209"
    name = "fsdp-misuse"
    summary = "A torch_xla FSDP model stepped or clipped as if it were not sharded"
    explanation = """
## Why

torch_xla's FSDP (`XlaFullyShardedDataParallel`, and FSDPv2 `SpmdFullyShardedDataParallel`)
shards the model's parameters in place and reduces the gradients itself in backward.
The class's own docstring (torch_xla 2.9,
`torch_xla/distributed/fsdp/xla_fully_sharded_data_parallel.py`) says:

> The optimizer must be initialized *after* the module has been wrapped, since FSDP
> will shard parameters in-place and this will break any previously initialized
> optimizers.

> Please use `optim.step()` instead of `xm.optimizer_step(optim)` for optimizer
> update. The latter averages the gradients across XLA devices, which is incorrect for
> FSDP.

and its `clip_grad_norm_` method explains that `torch.nn.utils.clip_grad_norm_` "is not
applicable here, because each rank only has a partial view of all the grads in the
model": each process would clip by the norm of its own shard. None of this fails: the
model trains on wrong gradients, or not at all. (Not observable on one CPU device,
where there is one shard: checked statically.)

## What is flagged

For a model wrapped in torch_xla's FSDP (either class, whatever the import) on every
path to the line (`if args.use_fsdp: model = FSDP(model)` ... `if args.use_fsdp: ...
else: clip_grad_norm_(...)`: FSDP under the second test, not in its `else`):
- `xm.optimizer_step(opt)` where `opt` holds the model's parameters (an optimizer the
  file does not build in sight counts when the calls of its function pass, or else
  every optimizer the file builds is, an FSDP model's);
- an optimizer built from the module's parameters (`parameters()`, `named_parameters()`,
  parameter groups) before the wrap in the same function or class, following the
  calls: a wrap in a helper that `__init__` calls before building the optimizer comes
  first, wherever the helper is defined. An optimizer built before the model's move to
  the XLA device too is XLA501's (one mistake, one finding), whose fix builds it after
  the wrap, from the wrapped model; its `xm.optimizer_step` is still reported here;
- `torch.nn.utils.clip_grad_norm_(model.parameters(), ...)` of an
  `XlaFullyShardedDataParallel` model. Not for FSDPv2, whose parameters are global
  (SPMD) tensors.

## Fix

- safe: `xm.optimizer_step(opt)` -> `opt.step()` (`optimizer_args=a` -> `opt.step(**a)`);
  no fix for `barrier=True` (it was also a sync point), `groups=` or `pin_layout=`;
- unsafe: `clip_grad_norm_(model.parameters(), n)` -> `model.clip_grad_norm_(n)` (the
  norm of every shard; it is a collective, so every process must reach it);
- unsafe, for the optimizer's place: build it after the wrap, from the wrapped model
  (XLA501's fix when the move too comes after it): the statements that take the
  parameters (the optimizer, its parameter groups) move right after `model = FSDP(model)`.
  Unsafe because the optimizer then holds FSDP's flattened shards, which changes what its
  parameter groups and saved state refer to. No fix unless that is provably the same
  program otherwise: the optimizer and the wrap in one block (not in different branches
  or functions, not built by a helper), nothing between them uses the optimizer (a
  scheduler built from it) or binds what it reads, and the wrap rebinds the name the
  optimizer takes the parameters from (`model = FSDP(model)`, not `fsdp_model =
  FSDP(model)`).

## Example

```python
model = FSDP(Net().to(device))
opt = torch.optim.AdamW(model.parameters())
...
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
xm.optimizer_step(opt)
```
becomes
```python
model = FSDP(Net().to(device))
opt = torch.optim.AdamW(model.parameters())
...
model.clip_grad_norm_(1.0)
opt.step()
```
"""
    fix_availability = "sometimes"

    VALID = [
        # What the docstring asks: wrap, then build the optimizer, step it, clip through FSDP.
        Valid(
            """
            import torch
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            def _mp_fn(index):
                model = FSDP(Net())
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    model(x).backward()
                    model.clip_grad_norm_(1.0)
                    opt.step()
            """
        ),
        # No FSDP: xm.optimizer_step is right (XLA203's fix).
        Valid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                model = Net()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    model(x).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    xm.optimizer_step(opt)
            """
        ),
        # FSDPv2's parameters are global: torch's clip_grad_norm_ sees them whole.
        Valid(
            """
            import torch
            import torch_xla.runtime as xr
            from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel as FSDPv2
            xr.use_spmd()
            model = FSDPv2(Net())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x in loader:
                model(x).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            def _mp_fn(index):
                model = FSDP(Net())
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    model(x).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    xm.optimizer_step(opt)
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            def _mp_fn(index):
                model = FSDP(Net())
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    model(x).backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
            """,
            unsafe_fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            def _mp_fn(index):
                model = FSDP(Net())
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    model(x).backward()
                    model.clip_grad_norm_(1.0)
                    opt.step()
            """,
            count=2,
        ),
        # The optimizer is built before the wrap: it holds the unsharded parameters.
        # Unsafe fix: built after the wrap, from the wrapped model.
        Invalid(
            """
            import torch
            import torch_xla.distributed.fsdp as fsdp
            def _mp_fn(index):
                model = Net()
                opt = torch.optim.AdamW([{"params": model.parameters(), "lr": 1e-3}])
                model = fsdp.XlaFullyShardedDataParallel(model)
                for x in loader:
                    model(x).backward()
                    opt.step()
            """,
            unsafe_fixed="""
            import torch
            import torch_xla.distributed.fsdp as fsdp
            def _mp_fn(index):
                model = Net()
                model = fsdp.XlaFullyShardedDataParallel(model)
                opt = torch.optim.AdamW([{"params": model.parameters(), "lr": 1e-3}])
                for x in loader:
                    model(x).backward()
                    opt.step()
            """,
            count=1,
        ),
        # A scheduler built from the optimizer before the wrap: moving the optimizer
        # alone would leave it reading a name not yet bound. No fix.
        Invalid(
            """
            import torch
            import torch_xla
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
            model = Net().to(torch_xla.device())
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
            model = FSDP(model)
            """,
            unsafe_fixed=None,
            count=1,
        ),
        # The optimizer is a parameter of the training function; the file's only
        # optimizer is the FSDP model's. optimizer_args become the step's arguments.
        Invalid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel
            def train(model, opt, loader):
                for x in loader:
                    model(x).backward()
                    xm.optimizer_step(opt, optimizer_args={"closure": None})
            def _mp_fn(index):
                model = XlaFullyShardedDataParallel(Net())
                train(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel
            def train(model, opt, loader):
                for x in loader:
                    model(x).backward()
                    opt.step(**{"closure": None})
            def _mp_fn(index):
                model = XlaFullyShardedDataParallel(Net())
                train(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        parallelism = self.ctx.parallelism
        wraps = parallelism.wrapped(*XLA_FSDP_KINDS)
        if not wraps:
            return
        found: list[tuple[ast.Call, str, Fix | None]] = []
        for call in self.ctx.semantic.calls_of("optimizer_step"):
            if self.ctx.semantic.call_name(call) in OPTIMIZER_STEP:
                optimizer = stepped_optimizer(call)
                wrap = parallelism.fsdp_model_of_optimizer(optimizer)
                if wrap is not None:
                    fix = own_step_fix(call, self.ctx.span, "FSDP reduced the gradients")
                    found.append((call, self._optimizer_step_message(wrap), fix))
        for wrap in wraps:
            for construction in parallelism.optimizers_built_before(wrap):
                if self._moved_after(construction):
                    continue  # XLA501's, whose fix builds it after the wrap: one mistake, one finding
                message = (
                    f"this optimizer is built before the `{_class(wrap)}` wrap (line {wrap.call.lineno}): "
                    "it holds the unsharded parameters"
                )
                found.append((construction, message, self._build_after_wrap_fix(construction, wrap)))
        for call in self.ctx.semantic.calls_of("clip_grad_norm_"):
            if self.ctx.semantic.call_name(call) in CLIP_GRAD_NORM:
                model = _parameters_of(call.args[0] if call.args else keyword_value(call, "parameters"))
                wrap = parallelism.fsdp_wrap_of(model)
                if wrap is not None and wrap.kind is WrapKind.XLA_FSDP:
                    message = (
                        f"`torch.nn.utils.clip_grad_norm_` of FSDP-wrapped `{dotted_name(model)}` clips by the norm "
                        "of this process's shard only"
                    )
                    found.append((call, message, self._clip_fix(call, model)))
        for node, message, fix in sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset)):
            self.report(node, message, fix=fix)

    def _build_after_wrap_fix(self, construction: ast.Call, wrap: Wrap) -> Fix | None:
        """XLA501's fix for an optimizer built before the wrap (``optimizer_place``):
        the statements that take the parameters move right after the wrap, when that is
        provably the same program otherwise (one block, nothing between uses the
        optimizer, the wrap rebinds the model's name). Unsafe: the optimizer then holds
        FSDP's flattened shards, so its state and parameter groups are FSDP's."""
        objects = self.ctx.training_objects
        optimizer = next((o for o in objects.optimizers if o.call is construction), None)
        if optimizer is None or wrap.target not in optimizer.models:
            return None  # built by a helper, or from another name than the wrap's
        fix = build_after_wrap(objects, optimizer, wrap.target, wrap, self.ctx.span)
        return None if fix is None else self.fix("unsafe", fix.message, *fix.operations)

    def _moved_after(self, construction: ast.Call) -> bool:
        """The optimizer is also built before a move of its model to XLA (XLA501)."""
        objects = self.ctx.training_objects
        scope = enclosing_function(construction)
        at = (construction.lineno, construction.col_offset)
        return any(
            objects.move_after(name, scope, at) is not None
            for name in (dotted_name(model) for model in objects.held_models(construction))
            if name
        )

    @staticmethod
    def _optimizer_step_message(wrap: Wrap) -> str:
        # The fix's title says to step with the optimizer itself.
        return (
            f"`xm.optimizer_step` reduces again what `{_class(wrap)}` (line {wrap.call.lineno}) "
            "already reduced and sharded"
        )

    def _clip_fix(self, call: ast.Call, model: ast.expr):
        """``clip_grad_norm_(model.parameters(), n[, norm_type])`` -> ``model.clip_grad_norm_(...)``."""
        values: dict[str, ast.expr] = dict(zip(("parameters", "max_norm", "norm_type"), call.args))
        if len(call.args) > 3 or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        for kw in call.keywords:
            if kw.arg not in ("parameters", "max_norm", "norm_type") or kw.arg in values:
                return None
            values[kw.arg] = kw.value
        if "max_norm" not in values:
            return None
        template = "{model}.clip_grad_norm_({max_norm}"
        parts = [("model", self.ctx.span(model)), ("max_norm", self.ctx.span(values["max_norm"]))]
        if "norm_type" in values:
            template += ", norm_type={norm_type}"
            parts.append(("norm_type", self.ctx.span(values["norm_type"])))
        return self.fix(
            "unsafe",
            "clip by the norm of every shard (FSDP's own clip_grad_norm_)",
            ReplaceExpr(self.ctx.span(call), template + ")", tuple(parts)),
        )


def _class(wrap: Wrap) -> str:
    return wrap.kind.value


def _parameters_of(expr: ast.expr | None) -> ast.expr | None:
    """``model`` for ``model.parameters()`` (with no arguments)."""
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "parameters"
        and not expr.args
        and not expr.keywords
    ):
        return expr.func.value
    return None
