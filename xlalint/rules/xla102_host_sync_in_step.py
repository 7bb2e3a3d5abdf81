"""XLA102 host-sync-in-step: reading a tensor's value on the host inside the step."""

from __future__ import annotations

import ast

from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.rules.xla102.fixes import Fixes
from xlalint.rules.xla102.host_reads import WHY, HostReads, forces_bool, is_percent_format


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
and the gradients on the host several times in each step (its line search and stopping
tests): each read runs the graph so far, and the graphs differ, so XLA keeps compiling (no
fix: on XLA a first-order optimizer such as SGD or Adam avoids it).

**Not flagged**: code in a function or lambda passed to `xm.add_step_closure` (it runs
after the sync, when values are ready), code under a guard that runs it every N steps
(`if step % N == 0:`, the recommended way to log; `... and <any test>`; `... or <a test
that holds on single steps>`: `step == max_steps - 1`, a flag set by one; a guard is
rare only when its period is: `if step % args.log_every == 0:` with `--log_every`
defaulting to 1, or a `log_every = 1`, runs every step and its body is in the step), code after
the loop, evaluation loops (no `.backward()`), `len(x)`, `x.shape`, `print("epoch done")`,
a name that is a number on every path to the read (`n = n.item()` under `if ddp:`).

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
statement that only logs (it gets a step closure), and nothing reads it under a guard
whose period is 1: a read on every step would copy the tensor to the host as often as
the `.item()` did, of a graph that grows with the sum. Other uses have no fix: gate them
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
        # Every 100 steps by default: a rare guard.
        Valid(
            """
            import argparse
            import torch_xla
            parser = argparse.ArgumentParser()
            parser.add_argument("--log-every", type=int, default=100)
            args = parser.parse_args()
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                torch_xla.sync()
                if step % args.log_every == 0:
                    print(loss.item())
            """
        ),
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
        # Gated, and on the last step: a flag set by an equality test holds on single steps.
        Valid("""
            import torch
            for step in range(max_steps):
                last_step = step == max_steps - 1
                loss = model(x, y)
                loss.backward()
                opt.step()
                if step % 250 == 0 or last_step:
                    print(f"loss {loss.item():.4f}")
                if (step % 250 == 0 or step == max_steps - 1) and not use_compile:
                    history.append(loss.item())
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
        # A counter kept in a dict that the step then advances: a closure run at the sync
        # would print the next step's number (binding `state` binds the same dict): no fix.
        Invalid(
            """
            import torch_xla
            state = {"step": 0}
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                print(f"step {state['step']} loss {loss.item():.4f}")
                state["step"] += 1
                torch_xla.sync()
            """,
            fixed=None,
            count=1,
        ),
        # A guard whose period defaults to 1 runs every step: the read under it is in the step.
        Invalid(
            """
            import argparse
            import torch_xla
            parser = argparse.ArgumentParser()
            parser.add_argument("--log-every", type=int, default=1)
            args = parser.parse_args()
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                torch_xla.sync()
                if step % args.log_every == 0:
                    print(loss.item())
            """,
            fixed="""
            import argparse
            import torch_xla
            import torch_xla.core.xla_model as xm

            parser = argparse.ArgumentParser()
            parser.add_argument("--log-every", type=int, default=1)
            args = parser.parse_args()
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                torch_xla.sync()
                if step % args.log_every == 0:
                    xm.add_step_closure(lambda loss=loss: print(loss.item()))
            """,
            count=1,
        ),
        # Only the `.item()`: on every path to the print, `total` is a number.
        Invalid(
            """
            import torch
            import torch.distributed as dist
            for step, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                opt.step()
                total = len(y)
                if ddp:
                    total = torch.tensor(total, device=x.device)
                    dist.all_reduce(total)
                    total = total.item()
                print(f"seen {total}")
            """,
            count=1,
        ),
        # `or verbose`: a setting, true on every step when set.
        Invalid(
            """
            import torch
            for step, (x, y) in enumerate(loader):
                loss = model(x, y)
                loss.backward()
                opt.step()
                if step % 10 == 0 or verbose:
                    history.append(loss.item())
            """,
            count=1,
        ),
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
        # The backward runs in a scaler the caller passes (DeiT's `train_one_epoch`):
        # the loop is a step. The guard needs the loss value before it stops the run: no fix.
        Invalid(
            """
            import math
            import sys
            import torch

            class Scaler:
                def __call__(self, loss, optimizer):
                    loss.backward()
                    optimizer.step()

            def train_one_epoch(model, loader, optimizer, loss_scaler):
                for x, y in loader:
                    loss = model(x, y)
                    loss_value = loss.item()
                    if not math.isfinite(loss_value):
                        sys.exit(1)
                    loss_scaler(loss, optimizer)

            def main():
                train_one_epoch(model, loader, optimizer, Scaler())
            """,
            count=1,
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
        # the norm gets a step closure (it runs at the sync ending the outer body; with no
        # sync after it, the last step's closure would never run: reported, no fix), the
        # sum of `.item()`s a `.detach()` (unsafe); the gated print is not reported.
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
                torch_xla.sync()
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
                torch_xla.sync()
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
                torch_xla.sync()
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
        self.reads = HostReads(self.ctx)
        self.fixes = Fixes(self.ctx, self.reads)
        if not self.ctx.steps.loops:
            # No training step: every visit asks first for the step a node runs in.
            self.skipped_visits |= {ast.Call, ast.JoinedStr, ast.BinOp, ast.If, ast.IfExp, ast.While, ast.Assert}

    # -- visitors -------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        loop = self.reads.step_loop(node)
        if loop is None:
            return
        message = self.reads.host_read(node, loop)
        if message is not None:
            self.report(node, message, fix=self.fixes.fix(node, loop))
        elif self.reads.is_format_call(node) and not self.reads.logged(node) and self.reads.renders_tensor(node, loop):
            self.report(node, f"formatting a tensor as text in the training step {WHY}")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        loop = None if self.reads.logged(node) else self.reads.step_loop(node)
        if loop is not None and self.reads.renders_tensor(node, loop):
            self.report(node, f"formatting a tensor as text in the training step {WHY}")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not is_percent_format(node) or self.reads.logged(node):
            return
        loop = self.reads.step_loop(node)
        if loop is not None and self.reads.renders_tensor(node, loop):
            self.report(node, f"formatting a tensor as text in the training step {WHY}")

    def visit_If(self, node: ast.If) -> None:
        self._check_test(node.test, "`if`")

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._check_test(node.test, "a conditional expression")

    def visit_While(self, node: ast.While) -> None:
        self._check_test(node.test, "`while`")

    def visit_Assert(self, node: ast.Assert) -> None:
        self._check_test(node.test, "`assert`")

    def _check_test(self, test: ast.expr, what: str) -> None:
        loop = self.reads.step_loop(test)
        if loop is not None and forces_bool(test, loop):
            self.report(test, f"{what} on a tensor in the training step {WHY}")
