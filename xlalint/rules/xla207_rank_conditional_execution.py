"""XLA207 rank-conditional-execution: a collective, a sync or a host read that only some
processes run.

In a multi-process XLA script every process must run the same collectives and compile
and run the same graphs, in the same order. Work guarded by a test that differs between
processes (``if xm.is_master_ordinal():``) breaks that: the processes that skip it wait
in the next collective for one that never comes, and the run hangs without an error.
"""

from __future__ import annotations

import ast

from xlalint.analysis.ranks import paired
from xlalint.analysis.semantic import enclosing_function, enclosing_statement
from xlalint.analysis.steps import SYNC_CALLS, mutually_exclusive
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import Fix, InsertStatement, RemoveStatement
from xlalint.rules._messages import MESSAGE_LIMIT

XM = "torch_xla.core.xla_model"
DIST = "torch.distributed"
# Calls every process must make together: a process that skips one leaves the others
# waiting in it (torch_xla 2.9's collectives and rendezvous, torch.distributed's).
COLLECTIVES = frozenset(
    {
        *(
            f"{XM}.{name}"
            for name in (
                "all_reduce",
                "all_gather",
                "reduce_scatter",
                "all_to_all",
                "collective_permute",
                "mesh_reduce",
                "rendezvous",
                "reduce_gradients",
                "optimizer_step",
                "broadcast_master_param",
            )
        ),
        *(
            f"{DIST}.{name}"
            for name in (
                "all_reduce",
                "all_gather",
                "all_gather_into_tensor",
                "all_gather_object",
                "reduce_scatter",
                "reduce_scatter_tensor",
                "broadcast",
                "broadcast_object_list",
                "reduce",
                "gather",
                "scatter",
                "all_to_all",
                "barrier",
                "monitored_barrier",
            )
        ),
    }
)
# accelerate's rendezvous, a method of the Accelerator.
COLLECTIVE_METHODS = frozenset({"wait_for_everyone"})
HOST_READS = frozenset({"item", "cpu", "tolist", "numpy"})
_PRINT_KEYWORDS = frozenset({"flush"})


class RankConditionalExecution(Rule):
    code = "XLA207"
    name = "rank-conditional-execution"
    summary = "A collective, sync or host read that only some processes run: the run hangs"
    explanation = """
## Why

In a multi-process XLA script every process traces the same step, and the graph it
compiles holds the step's collectives (the all-reduce of `xm.optimizer_step`, ...). A
collective completes only when every process joins it. Under a test that differs
between processes (`if xm.is_master_ordinal():`) only some processes get there:

- a collective or rendezvous (`xm.all_reduce`, `xm.rendezvous`, `dist.barrier()`, ...)
  waits forever for the processes that skipped it;
- a sync (`torch_xla.sync()`, `xm.mark_step()`) runs the pending graph, with its
  collectives, on one process while the others run a different graph;
- a host read of a tensor of the step (`loss.item()`, `.cpu()`, `.tolist()`, `print` or
  an f-string of a tensor) executes the pending graph, with the same effect.

The run hangs, with no error; it is among the most repeated reports in pytorch/xla's
issues. torch_xla's own helpers avoid it: `xm.master_print(*args)` and `xm.save(...)`
are called on every process, so that every process evaluates the arguments, and they
choose the master themselves (torch_xla 2.9 `core/xla_model.py`). `xm.wait_device_ops()`
only waits for this process's device and is not flagged. (A hang needs two processes:
not observable on one CPU device, so this rule is tested statically.)

## What is flagged

In a multi-process XLA script, under a test that differs between processes (a call of
`xm.is_master_ordinal()`, `xm.get_ordinal()`, `xm.get_local_ordinal()`,
`xr.global_ordinal()`, `xr.local_ordinal()`, `dist.get_rank()`; accelerate's
`is_main_process`/`process_index`; `os.environ["RANK"]`; the launcher's process index;
a variable or parameter assigned from one), after an `if <such a test>: return`, or
in a same-module function that the module calls only under such a test:
a collective or rendezvous, a sync, and in the step a host read of a tensor of the
step. Not flagged: the same collective in one function under two different rank tests
or in both branches of one (`if not main: barrier()`, the work, `if main: barrier()`,
as HF's `main_process_first` does: each process reaches one); a test on a value every
process shares (`if epoch == 0`, `if args.debug`; whether this is a distributed launch:
a rank compared with a value no rank takes, `int(os.environ.get("RANK", -1)) != -1`,
`args.local_rank == -1`, `rank >= 0`, `rank is not None`, `"RANK" in os.environ`), `xm.master_print`/`xm.save` called on every process, work in a step
closure (`xm.add_step_closure`). A value depends on the rank through its data (`x =
loss if rank == 0 else 0`, a flag set under `if rank == 0:`), not because the rank is
in a text built beside it: a checkpoint path `f"ckpt_rank{rank}.pt"` or a log message
leaves the values around it shared, and a step counter restored from a checkpoint
(`global_step = ckpt["step"]`) is the same on every process, so `if global_step % N
== 0:` is not a rank test. A host read after a sync every process ran (`torch_xla.sync()`,
then `if rank == 0: print(loss.item())`) is not flagged: the sync computed the value,
and the read copies it without running a graph, unless the value is computed again (or
changed in place) between the sync and the read.

## Fix

unsafe, where the test's branch only prints: `if <rank test>: print(<args>)` ->
`xm.master_print(<args>)` (every process evaluates the arguments; the master prints;
which process prints may change). Otherwise none: compute on every process, before the
test, and keep only the printing or writing under it.

## Example

```python
if xm.is_master_ordinal():
    print(f"step {step} loss {loss.item()}")
```
becomes
```python
xm.master_print(f"step {step} loss {loss.item()}")
```
"""
    fix_availability = "sometimes"

    VALID = [
        # Every process reads the loss; the master prints.
        Valid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for step, (x, y) in enumerate(loader):
                    loss = model(x, y)
                    loss.backward()
                    xm.optimizer_step(opt)
                    xm.master_print(f"step {step} loss {loss.item()}")
            """
        ),
        # Computed on every process before the test; only the writing is guarded.
        Valid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for step, (x, y) in enumerate(loader):
                    loss = model(x, y)
                    loss.backward()
                    xm.optimizer_step(opt)
                    value = xm.mesh_reduce("loss", loss.item(), sum)
                    if xm.is_master_ordinal():
                        writer.add_scalar("loss", value, step)
            """
        ),
        # A test every process shares.
        Valid(
            """
            import torch_xla
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for epoch in range(3):
                    if epoch == 0:
                        xm.rendezvous("warmup")
                    torch_xla.sync()
            """
        ),
        # "Is this a torchrun launch": the same answer on every process (no rank is -1).
        Valid(
            """
            import os
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend
            ddp = int(os.environ.get("RANK", -1)) != -1
            if ddp:
                dist.init_process_group("xla", init_method="xla://")
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                if ddp:
                    dist.all_reduce(loss)
                if "RANK" in os.environ and os.environ.get("LOCAL_RANK") is not None:
                    dist.barrier()
            """
        ),
        # Every process ran the sync: the master copies a computed value, nothing runs.
        Valid(
            """
            import torch_xla
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for step, (x, y) in enumerate(loader):
                    loss = model(x, y)
                    loss.backward()
                    xm.optimizer_step(opt)
                    torch_xla.sync()
                    if xm.is_master_ordinal():
                        print(f"step {step} loss {loss.item()}")
            """
        ),
        # The rank only names the checkpoint file: the restored step counter is shared.
        Valid(
            """
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            def _mp_fn(index):
                path = f"ckpt_rank{xr.global_ordinal()}.pt"
                global_step = torch.load(path)["step"]
                for x, y in loader:
                    global_step += 1
                    if global_step % 100 == 0:
                        xm.rendezvous("checkpoint")
                        xm.save(model.state_dict(), path, master_only=False)
            """
        ),
        # One process: nothing to wait for.
        Valid(
            """
            import torch
            import torch_xla
            rank = 0
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                opt.step()
                if rank == 0:
                    print(loss.item())
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for step, (x, y) in enumerate(loader):
                    loss = model(x, y)
                    loss.backward()
                    xm.optimizer_step(opt)
                    if xm.is_master_ordinal():
                        print(f"step {step} loss {loss.item()}")
            """,
            unsafe_fixed="""
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                for step, (x, y) in enumerate(loader):
                    loss = model(x, y)
                    loss.backward()
                    xm.optimizer_step(opt)
                    xm.master_print(f"step {step} loss {loss.item()}")
            """,
            count=1,
        ),
        # A rendezvous and a barrier under the rank, through a variable and an early return.
        Invalid(
            """
            import torch.distributed as dist
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr
            def save_and_wait(model):
                if xr.global_ordinal() != 0:
                    return
                xm.save(model.state_dict(), "model.pt")
                dist.barrier()
            def _mp_fn(index):
                is_master = xr.global_ordinal() == 0
                if is_master:
                    xm.rendezvous("eval")
                save_and_wait(model)
            """,
            count=2,
        ),
        # Arithmetic on the rank keeps it a rank test: `rank - 1 == -1` is `rank == 0`.
        Invalid(
            """
            import os
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend
            ddp = int(os.environ.get("RANK", -1)) != -1
            rank = int(os.environ["RANK"]) if ddp else 0
            dist.init_process_group("xla", init_method="xla://")
            if ddp and rank - 1 == -1:
                dist.barrier()
            """,
            count=1,
        ),
        # A flag set under a rank test differs between processes too.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            def _mp_fn(index):
                evaluate_now = False
                if xm.is_master_ordinal():
                    evaluate_now = True
                if evaluate_now:
                    xm.rendezvous("evaluate")
            """,
            count=1,
        ),
        # The launcher's index; a sync and a host read outside print: no fix.
        Invalid(
            """
            import torch_xla
            def _mp_fn(index):
                for x, y in loader:
                    loss = model(x, y)
                    loss.backward()
                    opt.step()
                    if index == 0:
                        history.append(loss.item())
                        torch_xla.sync()
            torch_xla.launch(_mp_fn)
            """,
            count=2,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.parallelism.multiprocess:
            return
        candidates = self._candidates()
        if not candidates:
            return
        ranks = self.ctx.ranks
        reported: set[int] = set()
        tests = {id(node): ranks.rank_test(node) for node, _what in candidates}
        for node, what in candidates:
            test = tests[id(node)]
            stmt = enclosing_statement(node)
            if test is None or stmt is None or id(stmt) in reported:
                continue
            if what == "collective" and self._balanced(node, test, candidates, tests):
                continue
            if what == "host read" and self._read_after_sync(node):
                continue
            reported.add(id(stmt))
            self.report(node, self._message(node, what, test), fix=self._master_print_fix(stmt, test))

    def _balanced(self, call: ast.AST, test: ast.AST, candidates, tests) -> bool:
        """The same collective, in the same function, under another rank test or in the
        other branch of the same ``if``: every process reaches one of the two."""
        name = self.ctx.semantic.call_name(call) or self.ctx.source_of(call.func)  # type: ignore[attr-defined]
        function = enclosing_function(call)
        for other, what in candidates:
            if other is call or what != "collective" or enclosing_function(other) is not function:
                continue
            if (self.ctx.semantic.call_name(other) or self.ctx.source_of(other.func)) != name:  # type: ignore[attr-defined]
                continue
            other_test = tests[id(other)]
            if other_test is not None and (
                paired(test, other_test) or (other_test is test and mutually_exclusive(call, other))
            ):
                return True
        return False

    # -- what could hang ------------------------------------------------------------------
    def _candidates(self) -> list[tuple[ast.AST, str]]:
        """(node, kind) for every collective, sync, and host read of a step tensor."""
        semantic = self.ctx.semantic
        found: list[tuple[ast.AST, str]] = []
        collective_names = {name.rsplit(".", 1)[-1] for name in COLLECTIVES}
        for call in semantic.calls_of(*collective_names):
            if semantic.call_name(call) in COLLECTIVES:
                found.append((call, "collective"))
        for call in semantic.calls_of(*COLLECTIVE_METHODS):
            if isinstance(call.func, ast.Attribute):
                found.append((call, "collective"))
        for call in semantic.calls_of(*{name.rsplit(".", 1)[-1] for name in SYNC_CALLS}):
            if semantic.call_name(call) in SYNC_CALLS:
                found.append((call, "sync"))
        steps = self.ctx.steps
        if steps.loops:
            for call in semantic.calls_of(*HOST_READS):
                if isinstance(call.func, ast.Attribute) and not call.args and self._step_tensor(call.func.value, call):
                    found.append((call, "host read"))
            for call in semantic.calls_of("print"):
                if isinstance(call.func, ast.Name) and any(self._step_tensor(a, call) for a in call.args):
                    found.append((call, "host read"))
            for text in semantic.nodes_of(ast.JoinedStr):
                values = [v.value for v in text.values if isinstance(v, ast.FormattedValue)]
                if any(self._step_tensor(v, text) for v in values):
                    found.append((text, "host read"))
        return sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset))  # type: ignore[attr-defined]

    def _read_after_sync(self, read: ast.AST) -> bool:
        """Every step tensor ``read`` reads was computed by a sync that every process ran
        before it: the read copies data and runs no graph."""
        if isinstance(read, ast.JoinedStr):
            values = [v.value for v in read.values if isinstance(v, ast.FormattedValue)]
        elif isinstance(read, ast.Call) and isinstance(read.func, ast.Attribute):
            values = [read.func.value]
        else:
            values = list(read.args)  # type: ignore[attr-defined]
        values = [v for v in values if self._step_tensor(v, read)]
        for value in values:
            sync = self.ctx.steps.sync_before_read(read, value)
            if sync is None or self.ctx.ranks.rank_test(sync) is not None:
                return False
        return bool(values)

    def _step_tensor(self, expr: ast.expr, at: ast.AST) -> bool:
        loop = self.ctx.steps.loop_of(at)
        return loop is not None and loop.is_tensor(expr)

    # -- reporting ------------------------------------------------------------------------
    def _message(self, node: ast.AST, what: str, test: ast.AST) -> str:
        guard = test.test if isinstance(test, (ast.If, ast.While, ast.IfExp)) else test
        condition = self.ctx.source_of(guard)  # type: ignore[arg-type]
        # Why it hangs and what to do instead are the explanation's (and the fix's title).
        if what == "collective":
            name = self.ctx.source_of(node.func)  # type: ignore[attr-defined]
            head, tail = f"collective `{name}(...)` runs", "the run hangs"
        elif what == "sync":
            head, tail = "this sync runs", "the processes' graphs differ and the run hangs"
        else:
            head, tail = "this host read runs the step's graph", "the run hangs"
        line = test.lineno  # type: ignore[attr-defined]
        message = f"{head} only where `{condition}` (line {line}): {tail}"
        if len(message) > MESSAGE_LIMIT or "\n" in condition:
            # A test too long to quote: the line says where it is.
            message = f"{head} under a per-process test (line {line}): {tail}"
        return message

    def _master_print_fix(self, stmt: ast.stmt, test: ast.AST) -> Fix | None:
        """``if <rank test>: print(<args>)`` -> ``xm.master_print(<args>)``."""
        if not (
            isinstance(test, ast.If)
            and not test.orelse
            and test.body == [stmt]
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == "print"
            and all(k.arg in _PRINT_KEYWORDS for k in stmt.value.keywords)
            and test.lineno != stmt.lineno
        ):
            return None
        if any("#" in line for line in self.ctx.lines[test.lineno : stmt.end_lineno]):
            return None  # a comment in the branch would be lost with it
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm", test)
        call = stmt.value
        arguments = [(f"a{i}", self.ctx.span(a)) for i, a in enumerate(call.args)]
        arguments += [(f"k{i}", self.ctx.span(k.value)) for i, k in enumerate(call.keywords)]
        written = [f"{{a{i}}}" for i in range(len(call.args))]
        written += [f"{k.arg}={{k{i}}}" for i, k in enumerate(call.keywords)]
        return self.fix(
            "unsafe",
            "print on the master with `xm.master_print` (every process evaluates the arguments)",
            InsertStatement(self.ctx.span(test), f"{xm}.master_print({', '.join(written)})", "after", tuple(arguments)),
            RemoveStatement(self.ctx.span(test)),
            imports=imports,
        )
