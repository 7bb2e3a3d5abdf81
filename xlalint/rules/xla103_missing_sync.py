"""XLA103 missing-sync: a training step loop that never cuts the lazy graph."""

from __future__ import annotations

import ast

from xlalint.linter.model import AppendToBody, Fix, InsertStatement, MoveStatement, Operation
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.scripts import uses_syncing_library
from xlalint.linter.semantic import parent
from xlalint.linter.steps import StepLoop

# Statements after which nothing in the block runs: a sync goes before them.
_JUMPS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


class MissingSync(Rule):
    code = "XLA103"
    name = "missing-sync"
    summary = "training step loop with no sync point: the lazy graph grows across iterations"
    fix_availability = "safe"
    explanation = """
torch_xla records operations lazily and compiles and runs the graph only at a *sync
point*. A training loop with none keeps extending one graph across iterations: memory
grows, nothing runs until something reads a value, and each read compiles a new, ever
larger graph.

**Flagged**: the step loop (the innermost loop that calls `.backward()`, directly or
through functions of the same file) when its step has no sync point, or when its only
sync is under a gradient-accumulation guard (`if (i + 1) % k == 0:`): the graph then
spans k micro-steps.

Sync points: `torch_xla.sync()` (`xm.mark_step()` before 2.4), iterating a
`pl.MpDeviceLoader`/`ParallelLoader.per_device_loader` (or calling `next()` on one),
`xm.optimizer_step(opt, barrier=True)`, `with torch_xla.step():`, calling a
`torch_xla.compile`d function, also in helper functions the loop calls.

**Not flagged**: loops without `.backward()` (evaluation), scripts whose loop is run by
HF `Trainer`/`accelerate` (they sync), a micro-batch loop inside a `torch_xla.compile`d
function or a `with torch_xla.step():` block.

**Fix** (safe): a sync on every path that ends the step. `torch_xla.sync()`
(`xm.mark_step()` for targets before 2.4) is appended as the last statement of the
step-loop body, and inserted right before each `break`, `continue` or `return` that
leaves the step after its work began (`if args.dry_run: break`): without it, that path
never syncs, step closures never run, and whatever reads a tensor next (a
`torch.save`) traces the whole unsynced graph. A jump on the line of its `if`
(`if done: break`) gets the sync before the `if`. A jump before the statement that
reaches `.backward()` (`if batch is None: continue`) skips a step that has not started
and gets none. (A `try`/`finally` around the body was the alternative: it also syncs
while an exception propagates, and it re-indents the user's whole loop.) When the
step's only sync is a statement of its own under the gradient-accumulation guard, that
sync is moved to the end of the body instead: the same graphs, without a second sync on
the steps that apply the gradients.

```python
for i, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    if args.dry_run:
        torch_xla.sync()  # added
        break
    torch_xla.sync()  # added
```
"""

    VALID = [
        # Fed by an MpDeviceLoader: every `next()` syncs.
        Valid("""
            import torch_xla.distributed.parallel_loader as pl
            loader = pl.MpDeviceLoader(train_loader, device)
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
        """),
        # The device loader reaches the loop through a parameter.
        Valid("""
            import torch_xla.distributed.parallel_loader as pl
            def train_loop(loader):
                for step, (x, y) in enumerate(loader):
                    model(x).sum().backward()
            train_loop(pl.ParallelLoader(train_loader, [device]).per_device_loader(device))
        """),
        Valid("""
            import torch
            import torch_xla
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
                torch_xla.sync()
        """),
        Valid("""
            import torch_xla
            for x, y in loader:
                with torch_xla.step():
                    model(x, y).backward()
                    opt.step()
        """),
        Valid("""
            import torch_xla
            @torch_xla.compile
            def train_step(x, y):
                model(x, y).backward()
                opt.step()
            for x, y in loader:
                train_step(x, y)
        """),
        Valid("""
            import torch_xla.core.xla_model as xm
            for x, y in loader:
                model(x, y).backward()
                xm.optimizer_step(opt, barrier=True)
        """),
        # The sync is in a helper the loop calls.
        Valid("""
            from torch_xla.core import xla_model
            def finish_step(opt):
                opt.step()
                xla_model.mark_step()
            for x, y in loader:
                model(x, y).backward()
                finish_step(opt)
        """),
        # An evaluation loop: no backward.
        Valid("""
            import torch
            with torch.no_grad():
                for x, y in loader:
                    total += (model(x).argmax(-1) == y).sum()
        """),
        # HF Trainer drives the loop.
        Valid("""
            import torch
            from transformers import Trainer
            for x in data:
                model(x).backward()
            Trainer(model=model).train()
        """),
        # The epoch loop is not the step loop; the batch loop syncs.
        Valid("""
            import torch_xla
            for epoch in range(3):
                for x, y in loader:
                    model(x, y).backward()
                    torch_xla.sync()
        """),
        # Not in scope: never imports torch.
        Valid("""
            for x in data:
                x.backward()
        """),
        # A subclass of a trainer from another module overrides its per-epoch loop;
        # the base class calls it with its device loader (here rebound through islice):
        # nothing in this file says it is not one.
        Valid("""
            import itertools
            import torch
            from my_trainers import BaseTrainer

            class MyTrainer(BaseTrainer):
                def epoch(self, batches, n):
                    batches = itertools.islice(batches, n)
                    for x, y in batches:
                        self.loss(x, y).backward()
                        self.opt.step()
        """),
        # A loader parameter rebound from itself still holds what the callers pass.
        Valid("""
            import itertools
            import torch
            import torch_xla.distributed.parallel_loader as pl

            def run(batches, n):
                batches = itertools.islice(batches, n)
                for x, y in batches:
                    model(x, y).backward()

            run(pl.MpDeviceLoader(data, dev), 10)
        """),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
            """,
            fixed="""
            import torch
            import torch_xla
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
                torch_xla.sync()
            """,
            count=1,
        ),
        # A pure CUDA script gets the sync and the import it needs.
        Invalid(
            """
            import torch
            for epoch in range(3):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()
            """,
            fixed="""
            import torch
            import torch_xla

            for epoch in range(3):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()
                    torch_xla.sync()
            """,
            count=1,
        ),
        # Gradient accumulation: the only sync is every k micro-steps.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                if (i + 1) % k == 0:
                    opt.step()
                    xm.mark_step()
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                if (i + 1) % k == 0:
                    opt.step()
                xm.mark_step()
            """,
            count=1,
        ),
        # The guard's sync shares its block with nothing else: a sync is appended.
        Invalid(
            """
            import torch_xla
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                opt.step()
                if (i + 1) % k == 0:
                    torch_xla.sync()
            """,
            fixed="""
            import torch_xla
            for i, (x, y) in enumerate(loader):
                (model(x, y) / k).backward()
                opt.step()
                if (i + 1) % k == 0:
                    torch_xla.sync()
                torch_xla.sync()
            """,
            count=1,
        ),
        # Older target: xm.mark_step(); the backward is in a helper; a while loop.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            def train_step(batch):
                loss = model(batch)
                loss.backward()
                opt.step()
            step = 0
            while step < max_steps:
                train_step(next(it))
                step += 1
            """,
            fixed="""
            import torch_xla.core.xla_model as xm
            def train_step(batch):
                loss = model(batch)
                loss.backward()
                opt.step()
            step = 0
            while step < max_steps:
                train_step(next(it))
                step += 1
                xm.mark_step()
            """,
            count=1,
            target_version="2.3",
        ),
        # The body ends with `continue`: the sync goes before it.
        Invalid(
            """
            import torch
            for x in data:
                model(x).backward()
                continue
            """,
            fixed="""
            import torch
            import torch_xla

            for x in data:
                model(x).backward()
                torch_xla.sync()
                continue
            """,
        ),
        # A dry-run `break` ends the step too: it gets a sync of its own.
        Invalid(
            """
            import torch
            import torch_xla
            for i, (x, y) in enumerate(loader):
                loss_fn(model(x), y).backward()
                opt.step()
                if args.dry_run:
                    break
            torch.save(model.state_dict(), "model.pt")
            """,
            fixed="""
            import torch
            import torch_xla
            for i, (x, y) in enumerate(loader):
                loss_fn(model(x), y).backward()
                opt.step()
                if args.dry_run:
                    torch_xla.sync()
                    break
                torch_xla.sync()
            torch.save(model.state_dict(), "model.pt")
            """,
            count=1,
        ),
        # `xm` means something else here: the import gets a fresh alias.
        Invalid(
            """
            import torch
            xm = 5
            for x in data:
                model(x).backward()
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm_1

            xm = 5
            for x in data:
                model(x).backward()
                xm_1.mark_step()
            """,
            target_version="2.3",
        ),
        # Rebound through islice, but the only caller passes a plain DataLoader.
        Invalid(
            """
            import itertools
            import torch

            def run(batches, n):
                batches = itertools.islice(batches, n)
                for x, y in batches:
                    model(x, y).backward()

            run(torch.utils.data.DataLoader(data), 10)
            """,
            fixed="""
            import itertools
            import torch
            import torch_xla

            def run(batches, n):
                batches = itertools.islice(batches, n)
                for x, y in batches:
                    model(x, y).backward()
                    torch_xla.sync()

            run(torch.utils.data.DataLoader(data), 10)
            """,
        ),
        # A subclass of a torch class (nn.Module) is not an opaque trainer.
        Invalid(
            """
            import torch

            class Net(torch.nn.Module):
                def fit(self, batches):
                    for x, y in batches:
                        self.loss(x, y).backward()
            """,
            fixed="""
            import torch
            import torch_xla

            class Net(torch.nn.Module):
                def fit(self, batches):
                    for x, y in batches:
                        self.loss(x, y).backward()
                        torch_xla.sync()
            """,
        ),
    ]

    def finish(self) -> None:
        if uses_syncing_library(self.ctx.semantic):
            return  # HF Trainer / accelerate sync for the script
        for loop in self.ctx.steps.loops:
            if self._delimited_elsewhere(loop):
                continue
            points = loop.sync_points()
            if not points:
                message = "training step loop with no sync point: the lazy graph grows across iterations"
            elif not loop.syncs_every_iteration():
                message = (
                    "training step loop syncs only every few iterations (under an every-N-steps guard): "
                    "the graph spans several micro-steps"
                )
            else:
                continue
            self.report(loop.node, message, fix=self._fix(loop))

    def _delimited_elsewhere(self, loop: StepLoop) -> bool:
        """A micro-batch loop inside a ``torch_xla.compile``d function, or inside a
        ``with torch_xla.step():`` that is itself in a loop: the user delimited the step."""
        steps = self.ctx.steps
        node: ast.AST | None = loop.node
        inside_step_context = False
        while node is not None:
            node = getattr(node, "parent", None)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and steps.is_compiled_function(node):
                return True
            if isinstance(node, (ast.With, ast.AsyncWith)) and any(steps.is_step_context(i) for i in node.items):
                inside_step_context = True
            elif inside_step_context and isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                return True
        return False

    def _fix(self, loop: StepLoop) -> Fix | None:
        """A sync at the end of the body and before every jump that ends the step after
        its work began (``if args.dry_run: break``), so every path out of the step syncs."""
        body = loop.node.body
        if body[0].lineno == loop.node.lineno and len(body) > 1:
            return None  # `for x in y: a; b` on one line: leave the layout to the user
        sync, imports = self.ctx.xla_api("sync", "mark_step", at=loop.node)
        code = f"{sync}()"
        operations: list[Operation] = []
        anchors: list[ast.stmt] = []
        for jump in _step_exits(loop, self.ctx.steps):
            anchor = _own_line_statement(jump)
            if anchor is None or anchor is loop.node:
                return None
            if anchor not in anchors:
                anchors.append(anchor)
                operations.append(InsertStatement(self.ctx.span(anchor), code, "before"))
        guarded = _guarded_sync(loop)
        if guarded is not None and not isinstance(body[-1], _JUMPS):
            # The user's own sync moves out of the guard: appending one would sync twice
            # on the steps that apply the gradients.
            operations.append(MoveStatement(self.ctx.span(guarded), self.ctx.span(body[-1]), "after"))
            moved = self.ctx.source_of(guarded.value)
            message = f"Move `{moved}` out of the every-N guard to the end of the loop body"
            if len(operations) == 1:
                return self.fix("safe", message, *operations)
            message += f", and add `{code}` before each jump out of the step"
            return self.fix("safe", message, *operations, imports=imports)
        if not isinstance(body[-1], _JUMPS):
            operations.append(AppendToBody(self.ctx.header_span(loop.node), code))
        elif isinstance(body[-1], ast.Raise):
            operations.append(InsertStatement(self.ctx.span(body[-1]), code, "before"))
        where = "to the loop body" if len(operations) == 1 else "to the loop body and before each jump out of the step"
        return self.fix("safe", f"Add `{code}` {where}", *operations, imports=imports)


def _guarded_sync(loop: StepLoop) -> ast.Expr | None:
    """The step's only sync point when it is a statement of its own (``xm.mark_step()``
    on its line) under the every-N guard in the loop body, in a block that keeps other
    statements: moved to the end of the body it syncs every step, and once."""
    points = loop.sync_points()
    if len(points) != 1 or not isinstance(points[0], ast.Call):
        return None
    statement = parent(points[0])
    block_owner = parent(statement) if isinstance(statement, ast.Expr) else None
    if not isinstance(block_owner, ast.If) or loop.guard_of(points[0]) is None:
        return None
    block = block_owner.body if statement in block_owner.body else block_owner.orelse
    if len(block) < 2 or statement.lineno == block_owner.lineno:
        return None  # it would leave the block empty, or it shares the `if` line
    if any(other is not statement and statement.lineno in (other.lineno, other.end_lineno) for other in block):
        return None  # `a; xm.mark_step()`: not a line of its own
    node: ast.AST | None = block_owner
    while node is not None and node is not loop.node:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return None  # in a helper the loop calls
        node = parent(node)
    return statement if node is loop.node else None


def _step_exits(loop: StepLoop, steps) -> list[ast.stmt]:
    """The ``break``/``continue`` of ``loop`` and the ``return`` statements in its body
    (not those of nested loops or functions), after the first statement of the body that
    reaches ``.backward()``: an earlier jump (``if batch is None: continue``) skips a step
    that has not started, so it has nothing to sync."""
    body = loop.node.body
    start = next((i for i, stmt in enumerate(body) if steps.reaches_backward([stmt])), 0)
    exits: list[ast.stmt] = []
    for stmt in body[start:]:
        stack: list[tuple[ast.AST, bool]] = [(stmt, False)]
        while stack:
            node, in_nested_loop = stack.pop()
            if isinstance(node, ast.Return) or (isinstance(node, (ast.Break, ast.Continue)) and not in_nested_loop):
                exits.append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            nested = in_nested_loop or isinstance(node, (ast.For, ast.AsyncFor, ast.While))
            stack.extend((child, nested) for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
            if isinstance(node, ast.Try):
                stack.extend((h, nested) for h in node.handlers)
            elif isinstance(node, ast.Match):
                stack.extend((c, nested) for c in node.cases)
    return sorted(exits, key=lambda n: (n.lineno, n.col_offset))


def _own_line_statement(stmt: ast.stmt) -> ast.stmt | None:
    """The statement a line of code can go before: ``stmt`` itself, or, when it shares its
    line with the header of the statement it is in (``if args.dry_run: break``), that
    statement (a sync before the ``if`` also runs before the ``break``). None for a jump
    on the line of an ``except``/``case`` header (nothing can go between them)."""
    current: ast.stmt = stmt
    while True:
        owner = parent(current)
        if owner is None or getattr(owner, "lineno", None) != current.lineno:
            return current
        if not isinstance(owner, ast.stmt):
            return None
        current = owner
