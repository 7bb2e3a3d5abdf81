"""XLA102 host-sync-in-step on whole files: findings, fixes, idempotence."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, expected_fixed
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "XLA102"
CODE = "XLA102"

# (line, 1-based column, fix applicability or None) of every finding, per fixture.
EXPECTED = {
    "train_logging": [
        (11, 8, None),  # if torch.isnan(loss): in check(), a helper the loop calls
        (23, 32, "safe"),  # loss.item() in a print: wrapped in a step closure
        (24, 9, "safe"),  # logger.info("...", loss, ...)
        (25, 18, "unsafe"),  # total += loss.item()
    ],
    "hf_style": [
        (26, 39, "safe"),  # progress.set_postfix(loss=loss.item())
        (27, 13, "safe"),  # wandb.log({"train/loss": loss, ...})
        (28, 13, "safe"),  # writer.add_scalar("loss", loss, step)
        (29, 22, None),  # batch["labels"].tolist(): the batch was moved to the device
    ],
    "grad_accum": [
        # print of the norm after the micro-steps, in the optimizer step: no closure fix,
        # no sync follows it in the loop (the last step's closure would never run)
        (40, 9, None),
        (40, 40, None),  # loss_accum.item() in that print
        (41, 12, None),  # if loss_accum > 100:
    ],
    "not_flagged": [],
    # Issue 38: `if d_regularize:` (`i % args.d_reg_every == 0`) is a host bool, although
    # `args.d_reg_every` scales a backpropagated loss; the test of a tensor is reported.
    "gan_regularize": [(39, 12, None)],
    # Issue 38: steps whose backward runs in a helper passed as an argument. The
    # `.item()` the `math.isfinite` guard reads each step has no fix (the guard needs
    # the value before it stops the run), as in a step written out; the print gets a closure.
    "passed_step": [(28, 22, None), (40, 35, "safe")],
}


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def findings(source: str):
    source = textwrap.dedent(source)
    return [f for f in lint_source(source, "train.py", Settings()) if f.code == CODE]


def lines(source: str) -> list[int]:
    return [f.span.line for f in findings(source)]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    got = [(f.span.line, f.span.col + 1, f.fix.applicability if f.fix else None) for f in findings(read(f"{case}.py"))]
    assert got == EXPECTED[case]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fix(case, unsafe):
    assert_fixes_to(CODE, read(f"{case}.py"), f"{case}.py", expected_fixed(FIXTURES, case, unsafe), unsafe=unsafe)


def test_closure_fix_leaves_only_unfixable_findings():
    result = fix_source(read("train_logging.py"), "train.py", Settings(), unsafe=True, select=[CODE])
    remaining = [(f.span.line, f.fix) for f in result.remaining if f.code == CODE]
    assert remaining == [(12, None)]  # the `if` on a tensor has no fix (an import was added above)


def test_print_with_item_is_one_finding_at_the_item():
    source = """
        import torch
        for x in loader:
            loss = model(x)
            loss.backward()
            print(f"loss {loss.item()}")
    """
    (finding,) = findings(source)
    assert finding.message.startswith("`.item()`")
    assert (finding.span.line, finding.span.col) == (6, 18)


def test_tensor_tests_and_conversions():
    source = """
        import torch
        for x in loader:
            out = model(x)
            loss = out.loss
            loss.backward()
            assert not torch.isnan(loss)
            while loss > 10:
                loss = loss / 2
            scale = 2.0 if loss < 1 else 1.0
            value = float(loss)
            text = f"{out.logits[0]}"
            n = int(x.shape[0])
    """
    assert lines(source) == [7, 8, 10, 11, 12]


def test_module_is_not_a_tensor():
    source = """
        import torch
        for x in loader:
            loss = model(x)
            loss.backward()
            model.cpu()
            params = list(model.parameters())
            print(model)
    """
    assert lines(source) == []


def test_step_closures_named_and_partial():
    source = """
        import functools
        import torch_xla.core.xla_model as xm
        def report(loss):
            print(loss.item())
        def report2(step, loss):
            print(step, loss.item())
        for step, x in enumerate(loader):
            loss = model(x)
            loss.backward()
            xm.add_step_closure(report, args=(loss,))
            xm.add_step_closure(functools.partial(report2, step), args=(loss,))
            xm.add_step_closure(closure=lambda: print(loss.item()))
            xm.mark_step()
    """
    assert lines(source) == []


def test_guard_in_a_helper_and_guarded_helper():
    source = """
        import torch
        def log(step, loss):
            if step % 50 == 0:
                print(loss.item())
        def evaluate():
            return sum(model(x).sum().item() for x in val)
        for step, x in enumerate(loader):
            loss = model(x)
            loss.backward()
            log(step, loss)
            if step % 1000 == 0:
                evaluate()
            if step % 7 != 0:
                print(loss.item())
    """
    assert lines(source) == [15]  # `!= 0` runs on most steps


def test_loop_at_module_level_binds_only_what_the_step_changes():
    source = textwrap.dedent("""
        import torch
        import torch_xla.core.xla_model as xm
        extra = [torch.ones(1)]
        for i, x in enumerate(loader):
            loss = model(x)
            loss.backward()
            print(i, loss.item(), [t.item() for t in extra], len(x))
            xm.mark_step()
    """)
    result = fix_source(source, "t.py", Settings(), select=[CODE])
    assert result.error is None
    # `extra` is set before the loop: read as it is. Too long for a lambda: a `def`.
    assert (
        "    def log_step(i, loss, x):\n"
        "        print(i, loss.item(), [t.item() for t in extra], len(x))\n"
        "\n"
        "    xm.add_step_closure(log_step, args=(i, loss, x))\n"
    ) in result.source


def fix_of(source: str, unsafe: bool = False) -> str:
    source = textwrap.dedent(source)
    result = fix_source(source, "t.py", Settings(), unsafe=unsafe, select=[CODE])
    assert result.error is None
    again = fix_source(result.source, "t.py", Settings(), unsafe=unsafe, select=[CODE])
    assert again.source == result.source
    return result.source


def test_closure_binds_tensors_and_counters_not_parameters():
    # The lambda of issue 10 bound nine locals; only `step` and `loss` change in the step.
    fixed = fix_of("""
        import torch
        import torch_xla
        def train(model, loader, optimizer, scheduler, args, logger, device, epoch, pbar):
            step = 0
            for x, y in loader:
                loss = model(x.to(device), y.to(device))
                loss.backward()
                optimizer.step()
                step += 1
                logger.info("epoch %d step %d loss %.4f lr %g", epoch, step, loss.item(), scheduler.get_last_lr()[0])
                torch_xla.sync()
    """)
    assert (
        "        def log_step(loss, step):\n"
        '            logger.info("epoch %d step %d loss %.4f lr %g", epoch, step, loss.item(), '
        "scheduler.get_last_lr()[0])\n"
        "\n"
        "        xm.add_step_closure(log_step, args=(loss, step))\n"
    ) in fixed


def test_closure_def_gets_a_free_name_and_keeps_a_multi_line_call_aligned():
    fixed = fix_of("""
        import torch
        import torch_xla
        log_step = 3
        for i, x in enumerate(loader):
            loss = model(x)
            loss.backward()
            print(
                f"step {i}",
                loss.item(),
            )
            torch_xla.sync()
    """)
    assert (
        "    def log_step_1(i, loss):\n"
        "        print(\n"
        '            f"step {i}",\n'
        "            loss.item(),\n"
        "        )\n"
        "\n"
        "    xm.add_step_closure(log_step_1, args=(i, loss))\n"
    ) in fixed


def test_closure_import_avoids_a_taken_alias():
    fixed = fix_of("""
        import torch
        import torch_xla
        xm = 5
        for x in loader:
            loss = model(x)
            loss.backward()
            print(loss.item())
            torch_xla.sync()
    """)
    assert "import torch_xla.core.xla_model as xm_1\n" in fixed
    assert "    xm_1.add_step_closure(lambda loss=loss: print(loss.item()))\n" in fixed


ACCUMULATOR = """
    import torch
    import torch_xla
    total, seen = 0.0, 0
    for i, (x, y) in enumerate(loader):
        loss = model(x, y)
        loss.backward()
        total += loss.item()
        {read}
        torch_xla.sync()
    print(total)
"""


@pytest.mark.parametrize(
    "read, offered",
    [
        ("pass", True),  # read only after the loop
        ("if i % 100 == 0: print(total / (i + 1))", True),  # every N steps
        ('print(f"avg {total / (i + 1):.3f}")', True),  # a log statement: it gets a step closure
        ("avg = total / (i + 1)", False),  # copied to the host every step
        ("pbar.set_postfix(avg=total / (i + 1)); seen += 1", True),
        ("if total > 1e6: break", False),
    ],
)
def test_accumulator_fix_only_when_the_sum_is_not_read_every_step(read, offered):
    (finding,) = [f for f in findings(ACCUMULATOR.format(read=read)) if f.span.line == 8]
    assert (finding.fix is not None) == offered
    if offered:
        assert finding.fix.applicability == "unsafe"


def test_no_accumulator_fix_for_an_attribute_or_item():
    # transformers' Trainer: a tensor would end up in the JSON state.
    source = """
        import torch
        for inputs in loader:
            loss = model(**inputs).loss
            loss.backward()
            self.state.num_input_tokens_seen += inputs["input_ids"].numel().item()
            stats["loss"] += loss.item()
    """
    assert [(f.span.line, f.fix) for f in findings(source)] == [(6, None), (7, None)]


def test_globals_are_not_bound_inside_a_function():
    source = textwrap.dedent("""
        import torch
        import torch_xla.core.xla_model as xm
        PREFIX = "train"
        def train(model, loader):
            for x in loader:
                loss = model(x)
                loss.backward()
                print(PREFIX, loss.item(), sep=SEP)
                xm.mark_step()
    """)
    result = fix_source(source, "t.py", Settings(), select=[CODE])
    assert "xm.add_step_closure(lambda loss=loss: print(PREFIX, loss.item(), sep=SEP))" in result.source


def test_no_closure_fix_for_statements_that_do_more_than_log():
    source = """
        import torch
        for x in loader:
            loss = model(x)
            loss.backward()
            history.append(loss.item())
            if loss.item() > 5:
                break
    """
    got = findings(source)
    assert [(f.span.line, f.fix) for f in got] == [(6, None), (7, None)]


def test_accumulator_read_by_the_while_test_is_read_every_step():
    source = """
        import torch
        total = 0.0
        while total < 100:
            loss = model(x)
            loss.backward()
            total += loss.item()
    """
    (finding,) = findings(source)
    assert finding.fix is None


def test_closure_binds_an_exception_name():
    # `e` is deleted when its `except` block ends, before the closure runs.
    fixed = fix_of("""
        import torch
        import torch_xla
        for x in loader:
            loss = model(x)
            loss.backward()
            try:
                check(x)
            except ValueError as e:
                print(e, loss.item())
            torch_xla.sync()
    """)
    assert "        xm.add_step_closure(lambda e=e, loss=loss: print(e, loss.item()))\n" in fixed


def test_gradient_accumulation_step_reaches_helpers_of_the_optimizer_step_loop():
    """A helper the optimizer-step loop calls after the micro-steps runs on every
    optimizer step; one called only under the every-N guard, or after the loop, does not."""
    source = """
        import torch
        def report(it, value):
            print(f"{it}: {value.item():.3f}")
        def rare(value):
            print(value.item())
        for it in range(10):
            total = torch.zeros(())
            for micro in range(4):
                loss = model(x)
                total += loss.detach()
                loss.backward()
            scaler.step(optimizer)
            report(it, total)
            if it % 10 == 0:
                rare(total)
        print(total.item())
    """
    assert lines(source) == [4]


ACCUMULATION = """
    import torch
    import torch_xla
    def train(model, opt, batches, steps):
        for it in range(steps):
            for x in batches():
                loss = model(x)
                loss.backward()
                torch_xla.sync()
            opt.step()
            print(f"step {it} loss {loss.item()}")
            {jump}
        {after}
"""


@pytest.mark.parametrize(
    ("jump", "after", "closure"),
    [
        ("", "", False),  # no sync follows: the last step's closure would never run
        ("", "torch_xla.sync()", True),  # a sync right after the loop runs it
        ("torch_xla.sync()", "", True),  # a sync later in the outer body
        ("if it > 3: break", "torch_xla.sync()", True),  # a break still reaches the sync after
        ("if it > 3: return it", "torch_xla.sync()", False),  # a return skips it
        ("if it > 3: break\n            torch_xla.sync()", "", False),  # the break skips the one in the body
    ],
)
def test_step_closure_in_the_optimizer_loop_needs_a_later_sync(jump, after, closure):
    """With gradient accumulation, a log after the micro-steps runs in a step closure only
    when a sync follows it: the closure of the last optimizer step would otherwise never
    run and its line would be lost."""
    source = ACCUMULATION.replace("{jump}", jump).replace("{after}", after)
    (found,) = findings(source)
    assert (found.fix is not None and found.fix.applicability == "safe") is closure


def test_a_guard_whose_option_defaults_to_1_runs_every_step_and_keeps_the_sum_on_the_host():
    # `correct` is read under `if step % args.log_every == 0:` with `default=1`: a
    # `.detach()` would read a device sum every step (a bigger graph each time).
    source = read("log_every_default.py")
    (finding,) = findings(source)
    assert (finding.span.line, finding.fix) == (31, None)
    # With a default of 10 the guard is rare: the sum is accumulated on the device.
    rare = source.replace("default=1)", "default=10)")
    (finding,) = findings(rare)
    assert finding.fix is not None and finding.fix.message == "Accumulate the tensor on the device (`.detach()`)"


@pytest.mark.parametrize("period", ["args.log_every", "log_every", "1"], ids=["option-default", "name", "literal"])
def test_a_read_under_a_guard_of_period_1_is_in_the_step(period):
    source = f"""
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--log-every", type=int, default=1)
        args = parser.parse_args()
        log_every = 1
        for step, x in enumerate(loader):
            loss = model(x)
            loss.backward()
            if step % {period} == 0:
                value = loss.item()
    """
    assert lines(source) == [12]
    assert lines(source.replace("default=1)", "default=50)").replace("log_every = 1", "log_every = 50")) == (
        [12] if period == "1" else []
    )


@pytest.mark.parametrize("code", ["XLA102", "XLA302"])
def test_a_module_without_a_training_step_skips_the_step_rules_visits(code):
    """Issue 39: each call, `if` and f-string of a module without a step loop was asked
    which step it runs in."""
    import ast

    from xlalint.analysis.semantic import attach_parents
    from xlalint.engine.context import Context
    from xlalint.rules import rules_by_code

    def skipped(source: str) -> set[type]:
        tree = ast.parse(source)
        rule = rules_by_code()[code](Context(source, "t.py", tree, Settings(), attach_parents(tree)))
        rule.begin()
        return rule.skipped_visits

    no_step = "import torch\nfor x in loader:\n    y = model(x)\n    z = y[y > 0]\n    if y.sum() > 0:\n        print(y.item())\n"
    step = no_step + "    y.sum().backward()\n"
    assert ast.Call in skipped(no_step) and not skipped(step)
    assert findings_of(code, no_step) == [] and findings_of(code, step) != []


def findings_of(code: str, source: str) -> list[str]:
    return [f.code for f in lint_source(source, "t.py", Settings(), select=[code]) if f.code == code]
