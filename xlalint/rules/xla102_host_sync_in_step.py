"""XLA102 host-sync-in-step: reading a tensor's value on the host inside the step."""

from __future__ import annotations

import ast
from functools import cached_property

from xlalint.linter.model import Fix, InsertStatement, RemoveStatement, ReplaceExpr
from xlalint.linter.order import assigned_names
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.semantic import dotted_name, enclosing_statement, method_name, parent
from xlalint.linter.steps import HOST_FETCH_METHODS, StepLoop

# Builtins that convert a tensor to a Python value (and so read it on the host).
CONVERSIONS = frozenset({"float", "int", "bool", "str", "repr"})
NUMPY_CONVERSIONS = frozenset({"numpy.array", "numpy.asarray"})
# Logging: functions by qualified name, and methods by name.
LOG_FUNCTIONS = frozenset(
    {
        *(
            f"logging.{level}"
            for level in ("debug", "info", "warning", "warn", "error", "critical", "exception", "log")
        ),
        "wandb.log",
        "mlflow.log_metric",
        "mlflow.log_metrics",
        "tqdm.tqdm.write",
        "tqdm.write",
        "tqdm.auto.tqdm.write",
        "torch_xla.core.xla_model.master_print",
    }
)
LOGGER_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
# Receivers of `.log(...)` other than loggers: experiment trackers.
TRACKERS = frozenset({"wandb", "run", "experiment", "tracker", "accelerator", "mlflow", "neptune"})
# TensorBoard's SummaryWriter and tqdm progress bars: any receiver.
WRITER_METHODS = frozenset(
    {"add_scalar", "add_scalars", "add_histogram", "add_text", "add_image", "add_figure", "log_metrics"}
)
PROGRESS_METHODS = frozenset({"set_postfix", "set_postfix_str", "set_description", "set_description_str"})
# Optimizers whose `step` reads the loss and gradients on the host: LBFGS's line search
# and stopping tests (`float(loss)`, `if` on tensors), several times a step.
HOST_READING_OPTIMIZERS = frozenset({"torch.optim.LBFGS", "torch.optim.lbfgs.LBFGS"})
# Python-level names that cannot be bound by a lambda default.
_UNBINDABLE = frozenset({"super", "__class__"})


class HostSyncInStep(Rule):
    code = "XLA102"
    name = "host-sync-in-step"
    summary = "reading a tensor on the host in the training step forces an early graph execution"
    fix_availability = "sometimes"
    explanation = """
torch_xla runs the step's graph at the sync point at the end of the step. Reading a
tensor's value before that (`.item()`, `.tolist()`, `.numpy()`, `.cpu()`,
`float(loss)`, printing or logging a tensor, `if loss > x:`) makes torch_xla compile
and run the graph so far, right there, and usually compile the rest as a second graph:
every step pays for an extra execution, a device-to-host copy and often an extra
compile.

With gradient accumulation the step loop is the micro-step loop, and the optimizer
steps in the loop around it: the body of that *optimizer-step loop* (the nearest loop
around a micro-step loop that steps no optimizer, when its own body, or a same-file
function it calls, does: `opt.step()`, `scaler.step(opt)`, `xm.optimizer_step(opt)`)
runs on every optimizer step, and is part of the step too. Tensors carried out of the
micro-steps (`loss_accum += loss.detach()`) and made after them (the norm
`clip_grad_norm_` returns) are the step's tensors.

**Flagged**, in the step (the step-loop body and the same-file functions it calls):
`.item()`; `.tolist()`/`.numpy()`/`.cpu()` of a tensor produced in the step;
`float()`/`int()`/`bool()`/`str()` of one; `print`, `logging`/`logger.*`, `wandb.log`,
`writer.add_scalar`, `tqdm.set_postfix` and f-strings/`%`/`.format` that render one;
`if`/`while`/`assert` on one; the `step` of an `LBFGS` optimizer, which reads the loss
and the gradients on the host several times in each step (no fix: on XLA a first-order
optimizer such as SGD or Adam avoids it).

**Not flagged**: code in a function or lambda passed to `xm.add_step_closure` (it runs
after the sync, when values are ready), code under a guard that runs it every N steps
(`if step % N == 0:`, the recommended way to log), code after the loop, evaluation
loops (no `.backward()`), `len(x)`, `x.shape`, `print("epoch done")`.

**Fix**: a statement that only logs is run in a step closure (safe), after the sync.
It must log values it reads, not compute them: `print(criterion(model(x), y).item())`
has no fix, since in a closure the model would run after the optimizer step, outside
any `no_grad` block around it, as a graph of its own.
The closure binds the values that may change before it runs: the names assigned in
the step loop (this step's tensors, the loop variables, counters); parameters and
values set before the loop are read as they are. A short closure is a lambda,
`xm.add_step_closure(lambda loss=loss: print(loss.item()))`; one that would not fit
in 88 columns is a small `def` passed with `args=(...)`. Log statements on consecutive
lines that need a `def` share one (`log_step`, then `log_step_1`, ... for later ones in
the same function: a name nothing else binds there); a comment or blank line ends such
a run, and a statement with a comment (a `noqa` among them) keeps a closure of its own.
`total += loss.item()` becomes `total += loss.detach()` (unsafe: `total` becomes a
tensor on the device; read it once after the loop), offered only when `total` is a
plain variable (an attribute or item, `self.state.num_input_tokens_seen`, may be saved
as a number) that nothing in the step reads except under an every-N guard or in a
statement that only logs (it gets a step closure): a read on every step would copy the
tensor to the host as often as the `.item()` did. Other uses have no fix: gate them
with `if step % N == 0:` or move them into a step closure.

```python
for i, (x, y) in enumerate(loader):
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {i} loss {loss.item():.4f}")      # XLA102
    torch_xla.sync()
```
"""

    VALID = [
        # An optimizer other than LBFGS, given a closure.
        Valid("""
            import torch
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                def closure():
                    opt.zero_grad()
                    loss = model(x, y)
                    loss.backward()
                    return loss
                opt.step(closure)
        """),
        # Gated logging.
        Valid("""
            import torch
            for step, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                opt.step()
                if step % 10 == 0:
                    print(loss.item())
                    print(f"loss {loss}")
        """),
        # The divisor of the differentiated loss is a plain number, not a tensor.
        Valid("""
            import torch
            for i, (x, y) in enumerate(loader):
                loss = model(x, y)
                (loss / accumulation).backward()
                if (i + 1) % accumulation == 0:
                    opt.step()
        """),
        # Step closures: a lambda and a named function.
        Valid("""
            import torch_xla.core.xla_model as xm
            def log(loss):
                print(loss.item())
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                xm.add_step_closure(lambda: print(loss.item()))
                xm.add_step_closure(log, args=(loss,))
        """),
        # An evaluation loop: no backward.
        Valid("""
            import torch
            for x, y in eval_loader:
                correct += (model(x).argmax(-1) == y).sum().item()
        """),
        # After the loop.
        Valid("""
            import torch
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
            print(loss.item())
        """),
        # No tensor: host values and metadata.
        Valid("""
            import torch
            for i, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                print("epoch done", i, len(x), x.shape[0], x.size(0))
                if i > 100:
                    break
        """),
        # An epoch loop: the optimizer steps in the inner loop, so the epoch's print runs
        # after the step loop, once per epoch.
        Valid("""
            import torch
            for epoch in range(epochs):
                for x, y in loader:
                    loss = loss_fn(model(x), y)
                    loss.backward()
                    opt.step()
                print(f"epoch {epoch} loss {loss.item():.4f}")
        """),
        # Not in scope: never imports torch.
        Valid("""
            for x in data:
                loss = model(x)
                loss.backward()
                print(loss.item())
        """),
    ]

    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            for i, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                print(f"step {i} loss {loss.item():.4f}")
                torch_xla.sync()
            """,
            fixed="""
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm

            for i, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()

                def log_step(i, loss):
                    print(f"step {i} loss {loss.item():.4f}")

                xm.add_step_closure(log_step, args=(i, loss))
                torch_xla.sync()
            """,
            count=1,
        ),
        # Logging a tensor; reusing the `xm` alias however it was imported.
        Invalid(
            """
            import logging
            from torch_xla.core import xla_model
            logger = logging.getLogger(__name__)
            def train(model, loader, opt):
                for x, y in loader:
                    outputs = model(x, labels=y)
                    outputs.loss.backward()
                    opt.step()
                    logger.info("loss %s", outputs.loss)
                    xla_model.mark_step()
            """,
            fixed="""
            import logging
            from torch_xla.core import xla_model
            logger = logging.getLogger(__name__)
            def train(model, loader, opt):
                for x, y in loader:
                    outputs = model(x, labels=y)
                    outputs.loss.backward()
                    opt.step()

                    def log_step(outputs):
                        logger.info("loss %s", outputs.loss)

                    xla_model.add_step_closure(log_step, args=(outputs,))
                    xla_model.mark_step()
            """,
            count=1,
        ),
        # Accumulating `.item()`: unsafe fix to a device-side sum.
        Invalid(
            """
            import torch
            total = 0.0
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                total += loss.item()
            print(total)
            """,
            unsafe_fixed="""
            import torch
            total = 0.0
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                total += loss.detach()
            print(total)
            """,
            count=1,
        ),
        # A short closure: a lambda; `model` is set before the loop and read as it is.
        Invalid(
            """
            import torch_xla
            for x in loader:
                loss = model(x)
                loss.backward()
                print(model, loss)
                torch_xla.sync()
            """,
            fixed="""
            import torch_xla
            import torch_xla.core.xla_model as xm

            for x in loader:
                loss = model(x)
                loss.backward()
                xm.add_step_closure(lambda loss=loss: print(model, loss))
                torch_xla.sync()
            """,
            count=1,
        ),
        # Log statements on consecutive lines share one `def`, which binds what any of
        # them reads; a later one in the same function gets a `def` of its own, with a
        # name nothing else binds. A comment ends a run: it stays where it is.
        Invalid(
            """
            import torch_xla
            for step, (x, y) in enumerate(loader):
                out = model(x)
                loss = loss_fn(out, y)
                loss.backward()
                print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']}")
                print(f"step {step} mean {out.mean().item():.4f} labels {y.float().mean().item()}")
                torch_xla.sync()
                writer.add_scalar("train/loss/after-sync", loss, global_step=step)
                writer.add_scalar("train/mean/after-sync", out.mean(), global_step=step)
                # the outputs
                writer.add_histogram("train/out/after-sync", out, global_step=step)
            """,
            fixed="""
            import torch_xla
            import torch_xla.core.xla_model as xm

            for step, (x, y) in enumerate(loader):
                out = model(x)
                loss = loss_fn(out, y)
                loss.backward()

                def log_step(loss, out, step, y):
                    print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']}")
                    print(f"step {step} mean {out.mean().item():.4f} labels {y.float().mean().item()}")

                xm.add_step_closure(log_step, args=(loss, out, step, y))
                torch_xla.sync()

                def log_step_1(loss, out, step):
                    writer.add_scalar("train/loss/after-sync", loss, global_step=step)
                    writer.add_scalar("train/mean/after-sync", out.mean(), global_step=step)

                xm.add_step_closure(log_step_1, args=(loss, out, step))

                def log_step_2(out, step):
                    writer.add_histogram("train/out/after-sync", out, global_step=step)

                # the outputs
                xm.add_step_closure(log_step_2, args=(out, step))
            """,
            count=6,
        ),
        # Short statements keep a lambda each; a neighbour with a `noqa` is not moved.
        Invalid(
            """
            import torch_xla
            import torch_xla.core.xla_model as xm
            def log_step(): ...
            for x in loader:
                loss = model(x)
                loss.backward()
                print(loss.item())
                print(loss)
                print("loss now", loss.item())  # noqa: XLA102
                print("loss in this step, once more, with a long message:", loss, x.sum())
                torch_xla.sync()
            """,
            fixed="""
            import torch_xla
            import torch_xla.core.xla_model as xm
            def log_step(): ...
            for x in loader:
                loss = model(x)
                loss.backward()
                xm.add_step_closure(lambda loss=loss: print(loss.item()))
                xm.add_step_closure(lambda loss=loss: print(loss))
                print("loss now", loss.item())  # noqa: XLA102

                def log_step_1(loss, x):
                    print("loss in this step, once more, with a long message:", loss, x.sum())

                xm.add_step_closure(log_step_1, args=(loss, x))
                torch_xla.sync()
            """,
            count=3,
        ),
        # The sum is read on every step (`avg`) or is an attribute: no `.detach()` fix.
        Invalid(
            """
            import torch
            for i, x in enumerate(loader):
                loss = model(x)
                loss.backward()
                total += loss.item()
                avg = total / (i + 1)
                self.state.tokens_seen += x.sum().item()
            """,
            unsafe_fixed=None,
            count=2,
        ),
        # Control flow on a tensor and a conversion: no fix. In a helper the loop calls.
        Invalid(
            """
            import torch
            def step(model, x):
                loss = model(x).mean()
                loss.backward()
                if torch.isnan(loss):
                    raise ValueError("nan")
                return float(loss)
            for x in loader:
                losses.append(step(model, x))
            """,
            count=2,
        ),
        # `.cpu()`/`.numpy()` of a tensor: reported once, at the first host read.
        Invalid(
            """
            import torch
            for x, y in loader:
                logits = model(x)
                loss_fn(logits, y).backward()
                preds.extend(logits.argmax(-1).cpu().numpy())
            """,
            count=1,
        ),
        # A message printed right before the script stops: a step closure would never
        # run, so the print keeps its place (no fix); the `if` on the tensor is reported too.
        Invalid(
            """
            import sys
            import torch
            for x, y in loader:
                loss = loss_fn(model(x), y)
                if not torch.isfinite(loss):
                    print("stopping, loss is", loss.item())
                    sys.exit(1)
                loss.backward()
            """,
            count=2,
        ),
        # LBFGS reads the loss on the host inside its step; SGD given a closure does not.
        Invalid(
            """
            import torch
            opt = torch.optim.LBFGS(model.parameters())
            for x, y in loader:
                def closure():
                    opt.zero_grad()
                    loss = model(x, y)
                    loss.backward()
                    return loss
                opt.step(closure)
            """,
            count=1,
        ),
        # Gradient accumulation: the optimizer steps in the loop around the micro-steps,
        # whose body runs on every optimizer step. The print of the accumulated loss and
        # the norm gets a step closure, the sum of `.item()`s a `.detach()` (unsafe); the
        # gated print is not reported.
        Invalid(
            """
            import torch
            import torch_xla
            for it in range(max_iters):
                loss_accum = 0.0
                for micro in range(accum_steps):
                    loss = model(*get_batch()) / accum_steps
                    loss_accum += loss.detach()
                    loss.backward()
                    torch_xla.sync()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
                print(f"step {it} loss {loss_accum.item():.4f} norm {norm:.4f}")
                total += loss_accum.item()
                if it % log_interval == 0:
                    print(loss_accum.item())
            """,
            fixed="""
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm

            for it in range(max_iters):
                loss_accum = 0.0
                for micro in range(accum_steps):
                    loss = model(*get_batch()) / accum_steps
                    loss_accum += loss.detach()
                    loss.backward()
                    torch_xla.sync()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()

                def log_step(it, loss_accum, norm):
                    print(f"step {it} loss {loss_accum.item():.4f} norm {norm:.4f}")

                xm.add_step_closure(log_step, args=(it, loss_accum, norm))
                total += loss_accum.item()
                if it % log_interval == 0:
                    print(loss_accum.item())
            """,
            unsafe_fixed="""
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm

            for it in range(max_iters):
                loss_accum = 0.0
                for micro in range(accum_steps):
                    loss = model(*get_batch()) / accum_steps
                    loss_accum += loss.detach()
                    loss.backward()
                    torch_xla.sync()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()

                def log_step(it, loss_accum, norm):
                    print(f"step {it} loss {loss_accum.item():.4f} norm {norm:.4f}")

                xm.add_step_closure(log_step, args=(it, loss_accum, norm))
                total += loss_accum.detach()
                if it % log_interval == 0:
                    print(loss_accum.item())
            """,
            count=3,
        ),
        # The logged value runs the model: in a closure it would see the parameters
        # after opt.step(). Reported, no fix.
        Invalid(
            """
            import torch
            for x, y in loader:
                loss = model(x, y)
                loss.backward()
                print(criterion(model(x), y).item())
                opt.step()
            """,
            count=1,
        ),
    ]

    def begin(self) -> None:
        # The `def` names the closure fixes took: per first statement, and per scope.
        self._def_names: dict[int, str] = {}
        self._taken_in_scope: dict[int, set[str]] = {}

    # -- visitors -------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        loop = self._step_loop(node)
        if loop is None:
            return
        message = self._host_read(node, loop)
        if message is not None:
            self.report(node, message, fix=self._fix(node, loop))
        elif self._is_format_call(node) and not self._logged(node) and self._renders_tensor(node, loop):
            self.report(node, f"formatting a tensor as text in the training step {_WHY}")

    def _host_read(self, node: ast.Call, loop: StepLoop) -> str | None:
        """What ``node`` does that reads a step tensor on the host, if it does (the
        finding's message): ``.item()``, ``float(loss)``, logging a tensor, ..."""
        attr = method_name(node)
        if attr == "item" or (attr in HOST_FETCH_METHODS and loop.is_tensor(node.func.value)):  # type: ignore[union-attr]
            return f"`.{attr}()` in the training step {_WHY}"
        if self._is_conversion(node) and loop.is_tensor(node.args[0]):
            return f"`{dotted_name(node.func)}()` of a tensor in the training step {_WHY}"
        if self._is_log_call(node) and any(self._renders_tensor(a, loop) for a in _arguments(node)):
            return f"logging a tensor in the training step {_WHY}"
        if attr == "step" and dotted_name(node.func.value) in self._lbfgs_optimizers:  # type: ignore[union-attr]
            return (
                "LBFGS's `step` reads the loss and gradients on the host several times a step (line search, "
                "stopping tests): each read forces a graph execution and the graphs differ, so XLA keeps "
                "compiling; SGD or Adam avoids it"
            )
        return None

    @cached_property
    def _lbfgs_optimizers(self) -> frozenset[str]:
        """The names (``opt``, ``self.opt``) assigned an LBFGS optimizer in this module."""
        semantic = self.ctx.semantic
        return frozenset(
            name
            for call in semantic.calls
            if semantic.call_name(call) in HOST_READING_OPTIMIZERS
            for name in assigned_names(call)
        )

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        loop = None if self._logged(node) else self._step_loop(node)
        if loop is not None and self._renders_tensor(node, loop):
            self.report(node, f"formatting a tensor as text in the training step {_WHY}")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not _is_percent_format(node) or self._logged(node):
            return
        loop = self._step_loop(node)
        if loop is not None and self._renders_tensor(node, loop):
            self.report(node, f"formatting a tensor as text in the training step {_WHY}")

    def visit_If(self, node: ast.If) -> None:
        self._check_test(node.test, "`if`")

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._check_test(node.test, "a conditional expression")

    def visit_While(self, node: ast.While) -> None:
        self._check_test(node.test, "`while`")

    def visit_Assert(self, node: ast.Assert) -> None:
        self._check_test(node.test, "`assert`")

    def _check_test(self, test: ast.expr, what: str) -> None:
        loop = self._step_loop(test)
        if loop is not None and _forces_bool(test, loop):
            self.report(test, f"{what} on a tensor in the training step {_WHY}")

    def _step_loop(self, node: ast.AST) -> StepLoop | None:
        """The loop whose step runs ``node`` on every optimizer step: the step loop, or
        with gradient accumulation the optimizer-step loop around the micro-steps."""
        steps = self.ctx.steps
        return steps.loop_running_every_step(node) if steps.loops else None

    # -- what counts --------------------------------------------------------------
    def _is_conversion(self, call: ast.Call) -> bool:
        if len(call.args) != 1 or call.keywords:
            return False
        if isinstance(call.func, ast.Name):
            return call.func.id in CONVERSIONS and not self._shadowed(call.func.id)
        return self.ctx.semantic.call_name(call) in NUMPY_CONVERSIONS

    def _shadowed(self, name: str) -> bool:
        semantic = self.ctx.semantic
        return name in semantic.imports.bindings or name in semantic.module_functions

    def _is_log_call(self, call: ast.Call) -> bool:
        """``print``, ``logging.info``, ``logger.info``, ``wandb.log``, ``writer.add_scalar``,
        ``pbar.set_postfix``, ``xm.master_print``, ..."""
        func = call.func
        if isinstance(func, ast.Name) and func.id == "print":
            return not self._shadowed("print")
        if self.ctx.semantic.call_name(call) in LOG_FUNCTIONS:
            return True
        if not isinstance(func, ast.Attribute):
            return False
        receiver = (dotted_name(func.value) or "").rsplit(".", 1)[-1]
        if func.attr in LOGGER_METHODS and "log" in receiver.lower():
            return True
        if func.attr == "log" and receiver in TRACKERS:
            return True
        if func.attr == "write" and any(word in receiver.lower() for word in ("tqdm", "bar", "progress")):
            return True
        return func.attr in WRITER_METHODS or func.attr in PROGRESS_METHODS

    @staticmethod
    def _is_format_call(call: ast.Call) -> bool:
        return method_name(call) == "format" and isinstance(call.func.value, (ast.Constant, ast.JoinedStr))  # type: ignore[union-attr]

    def _renders_tensor(self, expr: ast.AST, loop: StepLoop) -> bool:
        """``expr`` is a tensor, or text made from one (f-string, ``%``, ``.format``)."""
        if loop.is_tensor(expr):
            return True
        if isinstance(expr, ast.JoinedStr):
            return any(isinstance(v, ast.FormattedValue) and loop.is_tensor(v.value) for v in expr.values)
        if isinstance(expr, ast.Call) and self._is_format_call(expr):
            return any(loop.is_tensor(a) for a in _arguments(expr))
        if _is_percent_format(expr):
            right = expr.right  # type: ignore[attr-defined]
            values = right.elts if isinstance(right, ast.Tuple) else [right]
            return any(loop.is_tensor(v) for v in values)
        return False

    def _logged(self, node: ast.AST) -> bool:
        """``node`` is an argument of a log call (which is reported instead)."""
        call = parent(node)
        if isinstance(call, ast.keyword):
            call = parent(call)
        return isinstance(call, ast.Call) and node is not call.func and self._is_log_call(call)

    # -- fixes --------------------------------------------------------------------
    def _fix(self, node: ast.Call, loop: StepLoop) -> Fix | None:
        stmt = enclosing_statement(node)
        if self._closure_fixable(stmt):
            return self._closure_fix(stmt, loop)  # type: ignore[arg-type]
        if method_name(node) == "item" and isinstance(stmt, ast.AugAssign) and self._accumulates(node, stmt, loop):
            receiver = node.func.value  # type: ignore[union-attr]
            operation = ReplaceExpr(self.ctx.span(node), "{recv}.detach()", (("recv", self.ctx.span(receiver)),))
            return self.fix("unsafe", "Accumulate the tensor on the device (`.detach()`)", operation)
        return None

    def _closure_fixable(self, stmt: ast.AST | None) -> bool:
        """``stmt`` only logs, and may run later, in a step closure."""
        return (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and self._is_log_call(stmt.value)
            and not self._leaves_before_sync(stmt)
            and _closure_names(stmt.value) is not None
            and self._only_reads(stmt.value)
        )

    def _only_reads(self, log: ast.Call) -> bool:
        """The values ``log`` logs are read, not computed: no call in its arguments runs
        the model or other code of the user's (``print(criterion(model(x), y).item())``).
        Run later in a closure, that code would see the parameters after the optimizer
        step, outside the ``no_grad``/autocast block around it, and as a graph of its own."""
        semantic = self.ctx.semantic
        for node in ast.walk(log):
            if node is log or not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _READING_METHODS:
                continue
            if isinstance(func, ast.Name) and func.id in _READING_BUILTINS and not self._shadowed(func.id):
                continue
            if (semantic.call_name(node) or "").startswith(_READING_MODULES):
                continue
            return False
        return True

    def _accumulates(self, item: ast.Call, stmt: ast.AugAssign, loop: StepLoop) -> bool:
        """``total += loss.item()`` may become ``total += loss.detach()``: the target is a
        plain variable (an attribute or item may be saved or serialized as a number:
        ``self.state.num_input_tokens_seen``), and nothing in the step reads it except
        under an every-N guard or in a statement that only logs (which gets a step
        closure): otherwise each read would copy the tensor to the host every step, as
        often as the ``.item()`` did, and more when several sums are read."""
        if not (isinstance(stmt.target, ast.Name) and _summed(item, stmt)):
            return False
        name = stmt.target.id
        reads = (n for n in loop.nodes() if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))
        test = loop.node.test if isinstance(loop.node, ast.While) else None
        return not any(
            (loop.contains(n) or (test is not None and n in ast.walk(test)))
            and not self._closure_fixable(enclosing_statement(n))
            for n in reads
        )

    def _leaves_before_sync(self, stmt: ast.stmt) -> bool:
        """A later statement of the same block leaves the step (``raise``, ``return``,
        ``break``, ``sys.exit()``): a closure would run after a sync that may never
        come, and the message (often the reason for stopping) would be lost."""
        block = _block(stmt)
        if block is None:
            return False
        for later in block[block.index(stmt) + 1 :]:
            if isinstance(later, (ast.Raise, ast.Return, ast.Break)):
                return True
            if isinstance(later, ast.Expr) and isinstance(later.value, ast.Call):
                name = self.ctx.semantic.call_name(later.value) or dotted_name(later.value.func) or ""
                if name in _EXITS:
                    return True
        return False

    def _closure_fix(self, stmt: ast.Expr, loop: StepLoop) -> Fix | None:
        """Run a log call in a step closure, binding the values the step changes:
        ``xm.add_step_closure(lambda loss=loss: print(loss.item()))``, or, when that
        would not fit on a line, a small ``def`` passed with ``args=(...)``. Log
        statements on the lines around it that need a ``def`` too share it (they run
        in their order, and one name is bound, not one per statement)."""
        indent = self._indent(stmt)
        run = self._closure_run(stmt, loop)
        if len(run) > 1 and not all(self._fits_lambda(s.value, indent) for s in run):  # type: ignore[attr-defined]
            bodies = [self._def_body(s.value, indent) for s in run]  # type: ignore[attr-defined]
            if all(body is not None for body in bodies):
                return self._def_fix(run, bodies)  # type: ignore[arg-type]
        call = stmt.value
        if self._fits_lambda(call, indent):  # type: ignore[arg-type]
            xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm", at=call)
            bound = _bound_names([call])  # type: ignore[list-item]
            head = f"lambda {', '.join(f'{n}={n}' for n in bound)}:" if bound else "lambda:"
            call_span = self.ctx.span(call)
            operation = ReplaceExpr(call_span, f"{xm}.add_step_closure({head} {{call}})", (("call", call_span),))
            return self.fix("safe", "Run it in a step closure (after the sync)", operation, imports=imports)
        body = self._def_body(call, indent)  # type: ignore[arg-type]
        return self._def_fix([stmt], [body]) if body is not None else None

    def _def_fix(self, run: list[ast.Expr], bodies: list[str]) -> Fix:
        """``def log_step(<names>): <the statements>`` before the first statement of
        ``run``, which becomes ``xm.add_step_closure(log_step, args=(<names>))``; the
        others are removed."""
        first = run[0].value
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm", at=first)
        bound = _bound_names([s.value for s in run])  # type: ignore[misc]
        function = self._function_name(run[0])
        define = f"def {function}({', '.join(bound)}):\n" + "".join(f"    {body}\n" for body in bodies)
        args = f", args=({bound[0]},)" if len(bound) == 1 else f", args=({', '.join(bound)})" if bound else ""
        register = f"{xm}.add_step_closure({function}{args})"
        first_span = self.ctx.span(first)
        return self.fix(
            "safe",
            "Run it in a step closure (after the sync)",
            InsertStatement(first_span, _escape(define), "before"),
            ReplaceExpr(first_span, _escape(register)),
            *(RemoveStatement(self.ctx.span(other)) for other in run[1:]),
            imports=imports,
        )

    def _indent(self, stmt: ast.stmt) -> int:
        line = self.ctx.lines[stmt.lineno - 1]
        return len(line) - len(line.lstrip())

    def _def_body(self, call: ast.Call, indent: int) -> str | None:
        return _indented_continuation(call, self.ctx.source_of(call), indent)

    def _fits_lambda(self, call: ast.Call, indent: int) -> bool:
        """``xm.add_step_closure(lambda <names>: <call>)`` fits on one line."""
        text = self.ctx.source_of(call)
        names = _bound_names([call])
        head = f"lambda {', '.join(f'{n}={n}' for n in names)}:" if names else "lambda:"
        return "\n" not in text and indent + len(f"xm.add_step_closure({head} {text})") <= _LINE_LENGTH

    def _closure_run(self, stmt: ast.Expr, loop: StepLoop) -> list[ast.stmt]:
        """The log statements around ``stmt`` that go into one closure with it: the
        statements of its block on the lines right before and after it that also log a
        step tensor. A comment or blank line ends the run (a comment stays where it is)."""
        block = _block(stmt)
        if block is None or self._commented(stmt):
            return [stmt]
        first = last = block.index(stmt)
        while first > 0 and self._joins(block[first - 1], block[first], loop):
            first -= 1
        while last + 1 < len(block) and self._joins(block[last], block[last + 1], loop):
            last += 1
        return block[first : last + 1]

    def _joins(self, before: ast.stmt, after: ast.stmt, loop: StepLoop) -> bool:
        """Two statements on consecutive lines that both need a step closure."""
        return (
            before.end_lineno is not None
            and before.end_lineno + 1 == after.lineno
            and all(self._needs_closure(s, loop) and not self._commented(s) for s in (before, after))
        )

    def _needs_closure(self, stmt: ast.stmt, loop: StepLoop) -> bool:
        """``stmt`` only logs, and is reported for reading a step tensor on the host."""
        return self._closure_fixable(stmt) and any(
            isinstance(n, ast.Call) and self._host_read(n, loop) is not None and self._step_loop(n) is not None
            for n in ast.walk(stmt)
        )

    def _commented(self, stmt: ast.stmt) -> bool:
        """A ``#`` on the statement's lines (a comment, or a ``noqa`` for one of its
        findings, which must not be moved with the others)."""
        return any("#" in line for line in self.ctx.lines[stmt.lineno - 1 : stmt.end_lineno])

    def _function_name(self, first: ast.stmt) -> str:
        """``log_step``, or ``log_step_1``, ...: a name nothing binds where the ``def``
        goes and no other closure of this function took."""
        key = id(first)
        if key not in self._def_names:
            names_here = self.ctx.semantic.names_at(first)
            scope = next(
                (a for a in _ancestors(first) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))),
                None,
            )
            taken = self._taken_in_scope.setdefault(id(scope), set())
            function, n = "log_step", 0
            while not names_here.free(function) or function in taken:
                n += 1
                function = f"log_step_{n}"
            taken.add(function)
            self._def_names[key] = function
        return self._def_names[key]


# A closure longer than this goes in a `def` (the line length of ruff and black).
_LINE_LENGTH = 88
_WHY = "copies it to the host and forces an early graph execution"
# Calls that end the process.
_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit", "os.abort"})
# Calls a logged value may make and still be read in a step closure, after the sync:
# they read, convert or format values, and run no model, no user code, no clock.
_READING_METHODS = frozenset(
    {
        *HOST_FETCH_METHODS,
        *("item", "detach", "float", "double", "half", "to", "clone", "view", "reshape", "squeeze", "flatten"),
        *("mean", "sum", "max", "min", "std", "var", "norm", "abs", "exp", "sqrt", "argmax", "argmin"),
        *("size", "dim", "numel", "format", "join", "get", "keys", "values", "items", "get_last_lr", "get_lr"),
    }
)
_READING_BUILTINS = frozenset(
    {"len", "round", "str", "repr", "float", "int", "bool", "abs", "min", "max", "sum", "format", "list", "tuple"}
)
_READING_MODULES = ("torch.", "math.", "numpy.")


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(kw.value for kw in call.keywords)]


def _is_percent_format(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mod)
        and isinstance(node.left, ast.Constant)
        and isinstance(node.left.value, str)
    )


def _forces_bool(test: ast.expr, loop: StepLoop) -> bool:
    """Evaluating ``test`` as a condition asks for a tensor's truth value."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _forces_bool(test.operand, loop)
    if isinstance(test, ast.BoolOp):
        return any(_forces_bool(v, loop) for v in test.values)
    return loop.is_tensor(test)


def _summed(item: ast.Call, stmt: ast.AugAssign) -> bool:
    """``total += loss.item()`` (or ``total -= 2 * loss.item()``): only arithmetic between
    the ``.item()`` and the ``+=``, so the sum can stay a tensor."""
    if not isinstance(stmt.op, (ast.Add, ast.Sub)):
        return False
    node: ast.AST | None = parent(item)
    child: ast.AST = item
    while node is not stmt:
        if not isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return False
        child, node = node, parent(node)
    return child is stmt.value


def _free_names(expr: ast.AST) -> set[str]:
    """Names ``expr`` reads that it does not bind itself (comprehension variables, lambda
    parameters)."""
    loaded = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(expr):
        if isinstance(node, ast.Lambda):
            a = node.args
            bound.update(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p)
    return loaded - bound


def _ancestors(node: ast.AST):
    current = parent(node)
    while current is not None:
        yield current
        current = parent(current)


def _shallow(scope: ast.AST):
    """The nodes of a scope, not those of nested functions, classes and comprehensions."""
    stack = list(ast.iter_child_nodes(scope)) if not isinstance(scope, ast.Lambda) else [scope.body]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(
            node,
            (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.Lambda,
                ast.ListComp,
                ast.SetComp,
                ast.DictComp,
                ast.GeneratorExp,
            ),
        ):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _closure_names(call: ast.Call) -> set[str] | None:
    """The names a log call reads that a closure must find, or None when it cannot be
    moved into one (it binds names itself, yields, awaits, calls ``super()``)."""
    if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(call)):
        return None
    names = _free_names(call)
    return None if names & _UNBINDABLE else names


def _bound_names(calls: list[ast.Call]) -> list[str]:
    """The names a closure running ``calls`` must bind: those they read that the step
    changes."""
    read = set().union(*(_closure_names(c) or set() for c in calls))
    return sorted(read & set().union(*(_rebound_in_step(c) for c in calls)))


def _block(stmt: ast.stmt) -> list[ast.stmt] | None:
    """The statement list ``stmt`` is in (a body, an ``else``, a ``finally``)."""
    container = parent(stmt)
    for field in ("body", "orelse", "finalbody"):
        candidate = getattr(container, field, None)
        if isinstance(candidate, list) and stmt in candidate:
            return candidate
    return None


def _rebound_in_step(node: ast.AST) -> set[str]:
    """The names that may hold another value by the time a closure registered at
    ``node`` runs (at the sync, usually the end of the step): those assigned in the
    outermost loop around ``node`` in its function (loop variables, this step's
    tensors, counters), or, outside a loop, in its function (a helper the step calls).
    Parameters and variables set before the loop keep their value: the closure reads
    them as they are."""
    scope: ast.AST | None = None
    region: ast.AST | None = None
    for anc in _ancestors(node):
        if isinstance(anc, (ast.For, ast.AsyncFor, ast.While)):
            region = anc
        elif isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
            scope = anc
            break
    if region is None:
        if scope is None or isinstance(scope, ast.Module):
            return set()
        region = scope
    # The loop's own nodes include its target (`for i, (x, y) in ...`). An `except ... as e`
    # name is deleted at the end of its block: a closure must have bound it.
    names: set[str] = set()
    for n in _shallow(region):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.ExceptHandler, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name:
            names.add(n.name)
    return names


def _indented_continuation(call: ast.Call, text: str, indent: int) -> str | None:
    """The call's source as the body of a ``def`` at column 0 (the fix is re-indented where
    it goes): continuation lines keep their place relative to the statement, one level
    deeper. None when a string spans lines (its text would change) or a continuation line
    is left of the statement."""
    if "\n" not in text:
        return text
    for node in ast.walk(call):
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and node.lineno != node.end_lineno:
            return None
    first, *rest = text.split("\n")
    lines = [first]
    for line in rest:
        if line.strip() and (len(line) - len(line.lstrip()) < indent or not line[:indent].isspace()):
            return None
        lines.append(f"    {line[indent:]}" if line.strip() else "")
    return "\n".join(lines)


def _escape(code: str) -> str:
    """Code as a fix template (no parts): braces doubled."""
    return code.replace("{", "{{").replace("}", "}}")
