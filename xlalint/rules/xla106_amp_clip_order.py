"""XLA106 amp-clip-order: gradient clipping, unscaling and all-reduce in the wrong order.

The order that works (transformers' Trainer, accelerate, the AWS Neuron and PyTorch AMP
docs) is in the rule's explanation below: backward, all-reduce (multi-process),
``unscale_``, clip, ``scaler.step``, ``scaler.update``.

The order is judged along each path through the step (``xlalint.analysis.order``): a
clip in the ``else`` of ``if use_amp:`` is never compared with an ``unscale_`` in its
``if``, and a path that never touches the scaler is not an AMP path.
"""

from __future__ import annotations

import ast

from xlalint.analysis.order import STEPS, Event, Kind, Path
from xlalint.analysis.semantic import enclosing_function, parent
from xlalint.analysis.syntax import argument
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import InsertStatement, MoveStatement, ReplaceExpr

# The frames most examples share, so that each example shows only the lines of its step.
CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)"
UNSCALE = "scaler.unscale_(opt)"
XM = "import torch_xla.core.xla_model as xm"
PER_GROUP_CLIP = ("for group in optimizer.param_groups:", '    torch.nn.utils.clip_grad_norm_(group["params"], 1.0)')


def scaled_loop(*step: str, imports: tuple[str, ...] = (), opt: str = "opt") -> str:
    """An example: a GradScaler loop whose body is the scaled backward, ``step``, then
    ``scaler.step(opt)`` and ``scaler.update()``."""
    head = ["import torch", *imports, "scaler = torch.cuda.amp.GradScaler()", "for x, y in loader:"]
    body = ["scaler.scale(model(x, y)).backward()", *step, f"scaler.step({opt})", "scaler.update()"]
    return "\n".join(head + ["    " + line for line in body]) + "\n"


def process_loop(*step: str, imports: tuple[str, ...] = (XM,)) -> str:
    """An example: a multi-process script (``_mp_fn``) whose loop body is the backward, then ``step``."""
    head = ["import torch", *imports, "def _mp_fn(index):", "    for x, y in loader:"]
    return "\n".join(head + ["        " + line for line in ("model(x, y).backward()", *step)]) + "\n"


# What went wrong, in the order a finding at the same call is preferred.
AFTER_STEP = "after-step"
NO_UNSCALE = "no-unscale"
LATE_REDUCE = "late-reduce"
CLIP_BEFORE_REDUCE = "clip-before-reduce"

MESSAGES = {
    AFTER_STEP: "Gradients are clipped after the optimizer step, which has already used them: clip before the step",
    NO_UNSCALE: "Gradients are clipped while still scaled by the GradScaler: call `scaler.unscale_(optimizer)` "
    "before clipping",
    LATE_REDUCE: "Gradients are all-reduced after `unscale_`/clipping: all-reduce them right after the backward",
    CLIP_BEFORE_REDUCE: "Gradients are clipped before `xm.optimizer_step` all-reduces them: each process clips its own",
}


class AmpClipOrder(Rule):
    code = "XLA106"
    name = "amp-clip-order"
    summary = "Gradient clipping, unscaling and all-reduce are in the wrong order"
    explanation = """
## Why

`clip_grad_norm_` measures the gradients it finds. With a `GradScaler` they are still
multiplied by the loss scale (65536 at first) until `scaler.unscale_(opt)`, so the
norm is huge and the clip crushes every update. Clipping after `scaler.step(opt)` or
`opt.step()` changes gradients that are never used again. In a multi-process XLA
script, every process has its own gradients until they are all-reduced: clipping
before `xm.optimizer_step(opt)` (which all-reduces and steps) clips each process's
share with a different norm, and an all-reduce after `unscale_` or after clipping
likewise comes too late. The working order is:

```python
scaler.scale(loss).backward()
# multi-process: all-reduce the gradients here
scaler.unscale_(opt)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(opt)
scaler.update()
```

## What is flagged

Judged along each path through the step (the step-loop body and the same-module
functions it calls; `if`/`else` branches are separate paths, and the same condition
takes the same branch each time):

- on a path that uses a GradScaler (scales the loss, unscales, steps or updates
  through it): `clip_grad_norm_`/`clip_grad_value_` with no `scaler.unscale_(opt)`
  since the backward; an all-reduce of gradients (`xm.all_reduce` of
  `xm._fetch_gradients(opt)` or of `.grad`s, `xm.reduce_gradients(opt)`) after
  `unscale_` or after the clip;
- in a file that uses a GradScaler or a multi-process XLA script, on any path:
  clipping after `scaler.step`/`opt.step`/`xm.optimizer_step` with no step after it;
- on a path without a scaler, in a multi-process XLA script: clipping before
  `xm.optimizer_step(opt)` with no all-reduce before the clip (not under torch_xla's
  FSDP or SPMD, where the gradients are reduced or global already and
  `xm.optimizer_step` is itself the mistake: XLA209, XLA210).

Not flagged: the order above; clipping without a scaler on one process (before or
after `opt.step()`); a path that never uses the scaler (`if use_amp:
scaler.unscale_(opt)` ... `else: opt.step()`); `clip_grad_norm_(params, inf)`, which
only measures the norm; clipping outside the step (a helper the loop never calls,
code after the loop).

## Fix

- safe: insert `scaler.unscale_(opt)` before the clip (`scaler` and `opt` from the
  `scaler.step(opt)` call; an `unscale_` that comes after the clip is moved instead).
- unsafe: move a clip that follows the step to just before the step; move a late
  all-reduce to just after the backward; replace clip-then-`xm.optimizer_step(opt)`
  with `xm.reduce_gradients(opt)`, the clip, `opt.step()`.

## Example

```python
scaler.scale(loss).backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # XLA106
scaler.step(opt)
scaler.update()
```
becomes
```python
scaler.scale(loss).backward()
scaler.unscale_(opt)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(opt)
scaler.update()
```
"""
    fix_availability = "sometimes"

    VALID = [
        # The documented order.
        Valid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                opt.zero_grad()
                loss = model(x, y)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
            """
        ),
        # Without a scaler on one process, clipping before `opt.step()` is right.
        Valid(
            """
            import torch
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            """
        ),
        # Exclusive branches: the non-AMP path never uses the scaler.
        Valid(
            """
            import torch
            scaler = torch.amp.GradScaler("cuda")
            for x, y in loader:
                loss = model(x, y)
                if use_amp:
                    scaler.scale(loss).backward()
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
            """
        ),
        # The same condition takes the same branch: no path scales and skips unscale_.
        Valid(
            """
            from torch.cuda.amp import GradScaler
            from torch.nn.utils import clip_grad_norm_
            scaler = GradScaler()
            for x, y in loader:
                loss = model(x, y)
                if use_amp:
                    scaler.scale(loss).backward()
                    scaler.unscale_(opt)
                else:
                    loss.backward()
                clip_grad_norm_(model.parameters(), 1.0)
                if use_amp:
                    scaler.step(opt)
                    scaler.update()
                else:
                    opt.step()
            """
        ),
        # A clip in a helper that the loop never calls is not in the step.
        Valid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            def finetune_head(head):
                torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            for x, y in loader:
                scaler.scale(model(x, y)).backward()
                scaler.step(opt)
                scaler.update()
            """
        ),
        # Multi-process without a scaler: reduce first, then clip, then step.
        Valid(process_loop("xm.reduce_gradients(opt)", CLIP, "opt.step()")),
        # All-reduce right after the backward, before unscale_ and the clip.
        Valid(
            scaled_loop(
                'xm.all_reduce("sum", xm._fetch_gradients(opt))',
                UNSCALE,
                "torch.nn.utils.clip_grad_value_(model.parameters(), 1.0)",
                imports=(XM,),
            )
        ),
        # Measuring the norm with max_norm=inf (for logging) clips nothing; a scheduler
        # step is not an optimizer step.
        Valid(
            """
            import math
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for step, (x, y) in enumerate(loader):
                scaler.scale(model(x, y)).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
                scheduler.step()
                if step % 100 == 0:
                    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)
            """
        ),
        # Without a scaler on one process, a clip after the step is not this rule's.
        Valid(
            """
            import torch
            for x, y in loader:
                model(x, y).backward()
                opt.step()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """
        ),
        # xm.optimizer_step without a clip, and a clip in a single-process XLA script.
        Valid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            for x, y in loader:
                model(x, y).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                xm.optimizer_step(opt)
            """
        ),
    ]

    INVALID = [
        # Clip before unscale_: insert the unscale_ (safe).
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                loss = model(x, y)
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            """,
            fixed="""
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                loss = model(x, y)
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            """,
            count=1,
        ),
        # Clip under a gradient-accumulation guard: the unscale_ goes inside the guard,
        # next to the clip (before the `if`, it would run, and raise, every micro-step).
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for i, (x, y) in enumerate(loader):
                scaler.scale(model(x, y)).backward()
                if (i + 1) % accumulation == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
            """,
            fixed="""
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for i, (x, y) in enumerate(loader):
                scaler.scale(model(x, y)).backward()
                if (i + 1) % accumulation == 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
            """,
            count=1,
        ),
        # Clipping each parameter group: the unscale_ goes before that loop, once per step.
        Invalid(
            scaled_loop(*PER_GROUP_CLIP, opt="optimizer"),
            fixed=scaled_loop("scaler.unscale_(optimizer)", *PER_GROUP_CLIP, opt="optimizer"),
            count=1,
        ),
        # Through aliases, in a helper the loop calls, with `self.scaler`.
        Invalid(
            """
            import torch as T
            from torch.nn import utils
            class Trainer:
                def __init__(self):
                    self.scaler = T.amp.GradScaler("cuda")
                def train_step(self, x):
                    self.scaler.scale(self.model(x)).backward()
                    norm = utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.opt)
                    self.scaler.update()
                    return norm
                def fit(self, loader):
                    for x in loader:
                        self.train_step(x)
            """,
            fixed="""
            import torch as T
            from torch.nn import utils
            class Trainer:
                def __init__(self):
                    self.scaler = T.amp.GradScaler("cuda")
                def train_step(self, x):
                    self.scaler.scale(self.model(x)).backward()
                    self.scaler.unscale_(self.opt)
                    norm = utils.clip_grad_norm_(self.model.parameters(), 1.0)
                    self.scaler.step(self.opt)
                    self.scaler.update()
                    return norm
                def fit(self, loader):
                    for x in loader:
                        self.train_step(x)
            """,
            count=1,
        ),
        # An unscale_ after the clip is moved before it (a second one would raise).
        Invalid(scaled_loop(CLIP, UNSCALE), fixed=scaled_loop(UNSCALE, CLIP), count=1),
        # The unscale_ is on one branch only; the clip on the other path is flagged
        # (no fix: inserting a second unscale_ would raise on the first path).
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
            for x, y in loader:
                scaler.scale(model(x, y)).backward()
                if use_amp:
                    scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
            """,
            count=1,
        ),
        # Clipping after the step has no effect: moved before it with its comment
        # (unsafe), then unscaled (safe, on the next pass).
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                scaler.scale(model(x, y)).backward()
                scaler.step(opt)
                scaler.update()
                # keep the gradients bounded
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """,
            unsafe_fixed=scaled_loop(UNSCALE, "# keep the gradients bounded", CLIP),
            count=1,
        ),
        # All-reduce after unscale_ and clip: moved right after the backward (unsafe).
        Invalid(
            scaled_loop(UNSCALE, CLIP, "xm.reduce_gradients(opt)", imports=(XM,)),
            unsafe_fixed=scaled_loop("xm.reduce_gradients(opt)", UNSCALE, CLIP, imports=(XM,)),
            count=1,
        ),
        # Multi-process, no scaler: clip before xm.optimizer_step (unsafe rewrite).
        Invalid(
            process_loop(CLIP, "xla_model.optimizer_step(opt)", imports=("from torch_xla.core import xla_model",)),
            unsafe_fixed=process_loop(
                "xla_model.reduce_gradients(opt)", CLIP, "opt.step()", imports=("from torch_xla.core import xla_model",)
            ),
            count=1,
        ),
        # Positional `barrier` and `optimizer_args` (the signature's order) are read as such.
        Invalid(
            process_loop(CLIP, "xm.optimizer_step(opt, False, {'closure': None})"),
            unsafe_fixed=process_loop("xm.reduce_gradients(opt)", CLIP, "opt.step(**{'closure': None})"),
            count=1,
        ),
        Invalid(
            process_loop(CLIP, "xm.optimizer_step(opt, True)", imports=("import torch_xla", XM)),
            unsafe_fixed=process_loop(
                "xm.reduce_gradients(opt)", CLIP, "opt.step()", "torch_xla.sync()", imports=("import torch_xla", XM)
            ),
            count=1,
        ),
        # `barrier=True` made the step a sync point: the rewrite keeps one after `opt.step()`.
        Invalid(
            process_loop(CLIP, "xm.optimizer_step(opt, barrier=True)", imports=("import torch_xla", XM)),
            unsafe_fixed=process_loop(
                "xm.reduce_gradients(opt)", CLIP, "opt.step()", "torch_xla.sync()", imports=("import torch_xla", XM)
            ),
            count=1,
        ),
    ]

    def finish(self) -> None:
        distributed = self.ctx.distributed
        if not distributed.loop_paths:
            return
        finder, multiprocess = distributed.finder, self.ctx.parallelism.multiprocess
        # Clipping after the step is judged on every path of a file that uses a
        # GradScaler (or that all-reduces across processes), the scaler's or not.
        judge_late_clip = finder.has_scaler or multiprocess
        # Under XLA FSDP or SPMD the gradients are not per process: no reduce-first fix.
        reduce_first = multiprocess and not self.ctx.parallelism.gradients_not_per_process
        found: dict[int, tuple[str, Event, Path, list[Path]]] = {}
        for _loop, paths in distributed.loop_paths:
            for path in paths:
                for problem, event in problems(path, reduce_first, judge_late_clip):
                    known = found.get(id(event.call))
                    if known is None or _PRIORITY[problem] < _PRIORITY[known[0]]:
                        found[id(event.call)] = (problem, event, path, paths)
        for problem, event, path, paths in sorted(
            found.values(), key=lambda f: (f[1].call.lineno, f[1].call.col_offset)
        ):
            self.report(event.call, MESSAGES[problem], fix=self._fix(problem, event, path, paths))

    # -- fixes ------------------------------------------------------------------------
    def _fix(self, problem: str, event: Event, path: Path, paths: list[Path]):
        i = path.index(event)
        if problem == NO_UNSCALE:
            return self._unscale_fix(event, path, i, paths)
        if problem == AFTER_STEP:
            step = path.before(i, *STEPS)[0]
            if step.runs_backward:
                return None  # before it, the gradients are not made yet
            return self._move(event.stmt, step.stmt, "before", "move the clip before the optimizer step")
        if problem == LATE_REDUCE:
            backward = path.last_backward_before(i)
            if backward is None:
                return None
            return self._move(event.stmt, backward.stmt, "after", "all-reduce the gradients right after the backward")
        return self._reduce_first_fix(event, path, i)

    def _unscale_fix(self, clip: Event, path: Path, i: int, paths: list[Path]):
        next_step = next(iter(path.after(i, *STEPS)), None)
        later = [e for e in path.after(i, Kind.UNSCALE) if next_step is None or path.index(e) < path.index(next_step)]
        if later:
            # A second unscale_ before the step raises: move the one that is there.
            fix = self._move(later[0].stmt, clip.stmt, "before", "unscale the gradients before clipping", "safe")
            return fix
        if any(e.kind is Kind.UNSCALE for p in paths for e in p):
            # An unscale_ on another path; one more here might run twice on it.
            return None
        steps = [e for e in path.after(i, Kind.SCALER_STEP)] + path.before(i, Kind.SCALER_STEP)
        step = next((s for s in steps if enclosing_function(s.call) is enclosing_function(clip.call)), None)
        anchor = _line_statement(clip.stmt)
        if step is not None and anchor is not None:
            anchor = _outside_inner_loops(anchor, step.call)
        if step is None or step.scaler is None or step.optimizer is None or anchor is None:
            return None
        return self.fix(
            "safe",
            "unscale the gradients before clipping",
            InsertStatement(
                self.ctx.span(anchor),
                "{scaler}.unscale_({opt})",
                "before",
                (("scaler", self.ctx.span(step.scaler)), ("opt", self.ctx.span(step.optimizer))),
            ),
        )

    def _reduce_first_fix(self, clip: Event, path: Path, i: int):
        step = path.after(i, *STEPS)[0]
        call, opt = step.call, step.optimizer
        # xm.optimizer_step(optimizer, barrier=False, optimizer_args={}, ...) in torch_xla 2.9.
        barrier = argument(call, 1, "barrier")
        if (
            opt is None
            or enclosing_function(call) is not enclosing_function(clip.call)
            or not _is_statement_call(step)
            or any(k.arg not in ("optimizer", "optimizer_args", "barrier") for k in call.keywords)
            or (barrier is not None and not _is_literal_bool(barrier))
            or len(call.args) > 3
            or not _own_lines(clip.stmt)
        ):
            return None
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm")
        parts = [("opt", self.ctx.span(opt))]
        args = argument(call, 2, "optimizer_args")
        template = "{opt}.step()"
        if args is not None:
            template = "{opt}.step(**{args})"
            parts.append(("args", self.ctx.span(args)))
        operations = [
            InsertStatement(self.ctx.span(clip.stmt), f"{xm}.reduce_gradients({{opt}})", "before", (parts[0],)),
            ReplaceExpr(self.ctx.span(call), template, tuple(parts)),
        ]
        if _is_literal_bool(barrier, True):
            # `barrier=True` was also the step's sync point: keep one after the step.
            sync, sync_imports = self.ctx.xla_api("sync", "mark_step")
            operations.append(InsertStatement(self.ctx.span(step.stmt), f"{sync}()", "after"))
            imports = (*imports, *sync_imports)
        return self.fix(
            "unsafe",
            "all-reduce the gradients before clipping, then step",
            *operations,
            imports=imports,
        )

    def _move(self, stmt: ast.stmt, anchor: ast.stmt, where: str, message: str, applicability: str = "unsafe"):
        """Move ``stmt`` (with the comments above it) before/after ``anchor``; only
        within one block, and only a statement that is just the call (so nothing else
        moves with it)."""
        if stmt is anchor or not _same_block(stmt, anchor) or not _just_a_call(stmt):
            return None
        if not (_own_lines(stmt) and _own_lines(anchor)):
            return None
        return self.fix(
            applicability,  # type: ignore[arg-type]
            message,
            MoveStatement(self.ctx.span(stmt), self.ctx.span(anchor), where),  # type: ignore[arg-type]
        )


_PRIORITY = {AFTER_STEP: 0, NO_UNSCALE: 1, LATE_REDUCE: 2, CLIP_BEFORE_REDUCE: 3}


def problems(path: Path, multiprocess: bool, judge_late_clip: bool = True) -> list[tuple[str, Event]]:
    """What is out of order on one path."""
    found: list[tuple[str, Event]] = []
    amp = path.uses_scaler
    for i, event in enumerate(path):
        if event.kind is Kind.CLIP and _measures_only(event.call):
            continue
        if event.kind is Kind.CLIP and (amp or judge_late_clip) and _after_step(path, i):
            found.append((AFTER_STEP, event))
        elif event.kind is Kind.CLIP and amp:
            following = path.after(i, *STEPS)
            if not path.before(i, Kind.UNSCALE) and not (following and following[0].runs_backward):
                found.append((NO_UNSCALE, event))
        elif event.kind is Kind.CLIP and multiprocess:
            following = path.after(i, *STEPS)
            if following and following[0].reduces and not path.before(i, Kind.ALL_REDUCE):
                found.append((CLIP_BEFORE_REDUCE, event))
        elif event.kind is Kind.ALL_REDUCE and amp and path.before(i, Kind.UNSCALE, Kind.CLIP):
            found.append((LATE_REDUCE, event))
    return found


def _measures_only(call: ast.Call) -> bool:
    """``clip_grad_norm_(params, float("inf"))`` only measures the norm (for logging)."""
    limit = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "max_norm"), None)
    if isinstance(limit, ast.Attribute):
        return limit.attr == "inf"
    return (
        isinstance(limit, ast.Call)
        and isinstance(limit.func, ast.Name)
        and limit.func.id == "float"
        and len(limit.args) == 1
        and isinstance(limit.args[0], ast.Constant)
        and str(limit.args[0].value).lower() in ("inf", "+inf", "infinity")
    )


def _after_step(path: Path, i: int) -> bool:
    """The clip at ``i`` follows this iteration's optimizer step and precedes none."""
    return bool(path.before(i, *STEPS)) and not path.after(i, *STEPS)


def _same_block(a: ast.stmt, b: ast.stmt) -> bool:
    """``a`` and ``b`` are statements of the same body (not just the same parent)."""
    owner = parent(a)
    if owner is None or owner is not parent(b):
        return False
    for _name, value in ast.iter_fields(owner):
        if isinstance(value, list) and any(s is a for s in value):
            return any(s is b for s in value)
    return False


def _own_lines(stmt: ast.stmt) -> bool:
    """No other statement (nor a compound header) shares a line with ``stmt``: the fix
    operations act on whole lines (``a(); b()`` and ``if c: a()`` are one statement
    line to them)."""
    first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
    owner = parent(stmt)
    if owner is not None and not isinstance(owner, ast.Module) and owner.lineno == first:  # type: ignore[attr-defined]
        return False
    for _name, value in ast.iter_fields(owner) if owner is not None else ():
        if isinstance(value, list) and any(s is stmt for s in value):
            return not any(
                s is not stmt and s.lineno <= last and first <= (s.end_lineno or s.lineno)
                for s in value
                if isinstance(s, ast.stmt)
            )
    return True


def _line_statement(stmt: ast.stmt) -> ast.stmt | None:
    """The statement to insert before so that code lands just before ``stmt``: itself,
    or the one-line compound it is the body of (``if clip: clip_grad_norm_(...)``)."""
    current: ast.AST | None = stmt
    while isinstance(current, ast.stmt) and not _own_lines(current):
        owner = parent(current)
        if not isinstance(owner, ast.stmt) or owner.lineno != current.lineno:
            return None
        current = owner
    return current if isinstance(current, ast.stmt) else None


def _outside_inner_loops(stmt: ast.stmt, step: ast.Call) -> ast.stmt:
    """The statement to insert ``unscale_`` before so that it runs once per optimizer
    step: ``stmt`` itself, or the outermost loop around it that does not also hold the
    step (``for group in opt.param_groups: clip_grad_norm_(group["params"], ...)``: a
    second ``unscale_`` before the step raises)."""
    anchor = stmt
    node = parent(stmt)
    while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            if any(inner is step for inner in ast.walk(node)):
                break
            anchor = node
        node = parent(node)
    return anchor


def _just_a_call(stmt: ast.stmt) -> bool:
    """``f(...)`` or ``x = f(...)``: moving it moves nothing but the call (and its result)."""
    return isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Call)


def _is_literal_bool(node: ast.expr | None, value: bool | None = None) -> bool:
    """``node`` is the literal ``True``/``False`` (the given one, when ``value`` is set)."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, bool):
        return False
    return value is None or node.value is value


def _is_statement_call(event: Event) -> bool:
    return isinstance(event.stmt, ast.Expr) and event.stmt.value is event.call
