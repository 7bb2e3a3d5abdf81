"""XLA103 missing-sync on whole files: findings, fixes, idempotence."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, expected_fixed
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "XLA103"
CODE = "XLA103"

# (line, 1-based column, fix applicability) of every finding, per fixture.
EXPECTED = {
    "cuda_train": [(44, 9, "safe")],  # the batch loop; train_step() calls backward
    "grad_accum": [(11, 9, "safe")],  # the only sync is under `if (step + 1) % k == 0 or ...`
    "class_trainer": [(26, 9, "safe")],  # self.extra_loader is a plain loader
    "not_flagged": [],
    # evaluate(), Validator.run(), the loop under `if xm.is_master_ordinal():` (no fix)
    "eval_loops": [(16, 5, "safe"), (32, 9, "safe"), (44, 9, None)],
}


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def findings(source: str, settings: Settings | None = None):
    return [f for f in lint_source(source, "train.py", settings or Settings()) if f.code == CODE]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    got = [(f.span.line, f.span.col + 1, f.fix.applicability if f.fix else None) for f in findings(read(f"{case}.py"))]
    assert got == EXPECTED[case]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fix(case, unsafe):
    fixed = assert_fixes_to(
        CODE, read(f"{case}.py"), f"{case}.py", expected_fixed(FIXTURES, case, unsafe), unsafe=unsafe
    )
    # Only the findings that have no fix remain.
    assert len(findings(fixed)) == sum(fix is None for _, _, fix in EXPECTED[case])


def test_reported_at_the_loop_header():
    (finding,) = findings(read("cuda_train.py"))
    assert (finding.span.line, finding.span.end_line) == (44, 44)
    assert read("cuda_train.py").splitlines()[43][finding.span.col : finding.span.end_col] == "for x, y in loader"


def test_grad_accum_message_and_a_sync_before_the_break():
    (finding,) = findings(read("grad_accum.py"))
    assert "only every few iterations" in finding.message
    fixed = fix_source(read("grad_accum.py"), "train.py", Settings(), select=[CODE]).source
    # The early `continue` (before the step's work) gets nothing; the `break` after it does.
    assert "            if batch is None:\n                continue\n" in fixed
    assert "                torch_xla.sync()\n                break\n            xm.mark_step()\n" in fixed
    # The guard's own sync moved to the end of the body: one sync a step, not two.
    assert fixed.count("xm.mark_step()") == 1
    assert "optimizer.zero_grad()\n                completed_steps += 1\n" in fixed


def test_accumulation_sync_is_moved_not_duplicated_on_the_example():
    example = Path(__file__).resolve().parents[2] / "examples" / "grad_accumulation_sync.py"
    (finding,) = findings(example.read_text())
    assert finding.fix.message == "Move `torch_xla.sync()` out of the every-N guard to the end of the loop body"
    fixed = fixed_body(example.read_text())
    assert fixed.count("    torch_xla.sync()\n") == 1
    assert "                optimizer.zero_grad()\n            torch_xla.sync()\n        print(" in fixed


def test_a_guarded_sync_in_a_helper_is_not_moved():
    fixed = fixed_body("""
        import torch_xla
        def apply(i):
            if (i + 1) % k == 0:
                opt.step()
                torch_xla.sync()
        for i, x in enumerate(data):
            model(x).backward()
            apply(i)
    """)
    assert fixed.endswith("    apply(i)\n    torch_xla.sync()\n")
    assert fixed.count("torch_xla.sync()") == 2


def fixed_body(source: str, **settings) -> str:
    result = fix_source(textwrap.dedent(source), "train.py", Settings(**settings), select=[CODE])
    assert result.error is None
    assert findings(result.source) == []
    again = fix_source(result.source, "train.py", Settings(**settings), select=[CODE])
    assert again.source == result.source
    return result.source


def test_dry_run_break_syncs_on_both_paths():
    # pytorch/examples' `if args.dry_run: break` under the logging guard.
    fixed = fixed_body("""
        import torch
        for i, (x, y) in enumerate(loader):
            loss_fn(model(x), y).backward()
            opt.step()
            if i % 10 == 0:
                print(i)
                if args.dry_run:
                    break
    """)
    assert fixed.endswith(
        "        if args.dry_run:\n            torch_xla.sync()\n            break\n    torch_xla.sync()\n"
    )


def test_one_line_break_gets_the_sync_before_its_if():
    fixed = fixed_body("""
        import torch
        for x in data:
            model(x).backward()
            if dry_run: break
            opt.step()
            if done(): return_value = 1; continue
    """)
    assert fixed.endswith(
        "    model(x).backward()\n"
        "    torch_xla.sync()\n"
        "    if dry_run: break\n"
        "    opt.step()\n"
        "    torch_xla.sync()\n"
        "    if done(): return_value = 1; continue\n"
        "    torch_xla.sync()\n"
    )


def test_return_from_the_loop_and_nested_loops_break():
    fixed = fixed_body(
        """
        import torch_xla.core.xla_model as xm
        def train(data):
            for x in data:
                model(x).backward()
                for g in groups:
                    if g is None:
                        break
                if stop(x):
                    return x
        """,
        target_version=(2, 3),
    )
    # The inner loop's `break` does not leave the step.
    assert "            if g is None:\n                break\n" in fixed
    assert fixed.endswith(
        "        if stop(x):\n            xm.mark_step()\n            return x\n        xm.mark_step()\n"
    )


def test_jump_on_an_except_line_gets_no_fix():
    source = "import torch\nfor x in data:\n    model(x).backward()\n    try:\n        f()\n    except E: break\n"
    (finding,) = findings(source)
    assert finding.fix is None


def test_a_taken_name_gets_a_fresh_alias():
    # `torch_xla` is a parameter of the function that holds the loop.
    fixed = fixed_body("""
        import torch
        def train(torch_xla, data):
            for x in data:
                model(x).backward()
    """)
    assert "import torch_xla as torch_xla_1\n" in fixed
    assert fixed.endswith("        model(x).backward()\n        torch_xla_1.sync()\n")


def test_old_target_appends_mark_step():
    result = fix_source(read("cuda_train.py"), "train.py", Settings(target_version=(2, 3)), select=[CODE])
    assert result.error is None
    assert "            xm.mark_step()\n" in result.source
    assert "import torch_xla.core.xla_model as xm\n" in result.source
    assert "torch_xla.sync" not in result.source


def test_hf_trainer_and_accelerate_scripts_are_not_reported():
    loop = "for batch in loader:\n    model(**batch).loss.backward()\n"
    assert findings("import torch\n" + loop)
    assert findings("import torch\nfrom accelerate import Accelerator\nacc = Accelerator()\n" + loop) == []
    subclass = "import torch\nimport transformers\nclass MyTrainer(transformers.Trainer):\n    pass\n"
    assert findings(subclass + loop) == []


def test_step_context_around_the_whole_loop_is_not_enough():
    # One torch_xla.step() around all iterations is one graph for the epoch.
    source = "import torch_xla\nwith torch_xla.step():\n    for x in loader:\n        model(x).backward()\n"
    assert [f.span.line for f in findings(source)] == [3]


def test_micro_batch_loop_in_a_step_context_inside_an_outer_loop():
    source = (
        "import torch_xla\n"
        "for batch in loader:\n"
        "    with torch_xla.step():\n"
        "        for chunk in batch.split(4):\n"
        "            model(chunk).backward()\n"
        "        opt.step()\n"
    )
    assert findings(source) == []


def test_noqa_on_the_loop_header():
    source = "import torch\nfor x in data:  # noqa: XLA103\n    model(x).backward()\n"
    assert findings(source) == []


def test_one_line_loop_body():
    source = "import torch\nfor x in data: model(x).backward()\n"
    result = fix_source(source, "t.py", Settings(), select=[CODE])
    assert result.error is None
    assert result.source.endswith("for x in data:\n    model(x).backward()\n    torch_xla.sync()\n")


# --- loops that do not train but carry device state (issue 21 item 6) -------------------


def test_carried_state_message_names_the_state_and_the_rank_test_has_no_fix():
    found = findings(read("eval_loops.py"))
    assert [f.message.split("(")[1].split(")")[0] for f in found] == ["`correct`", "`self.total`", "`total`"]
    assert "under a per-process test: no fix" in found[2].message and found[2].fix is None
    assert "per-process test" not in found[0].message


def test_carried_state_in_a_cuda_script_is_reported_as_following_from_the_port():
    source = textwrap.dedent("""
        import torch
        device = torch.device("cuda")
        model = Net().to(device)
        total = 0
        for x, y in loader:
            total += model(x.to(device), y.to(device))
            print(total.item())
    """)
    (finding,) = findings(source)
    assert finding.after_port and finding.span.line == 6 and finding.fix is not None
    assert findings(source.replace('"cuda"', '"cpu"')) == []  # no port, no XLA script


def test_an_attribute_of_the_loop_variable_is_not_carried_state():
    # Each iteration binds its own `p`: `p.data` does not come from the previous one.
    source = textwrap.dedent("""
        import torch
        import torch_xla
        device = torch_xla.device()
        model = Net().to(device)
        for p in model.parameters():
            p.data = p.data.to(device)
            print(p.data.sum().item())
        total = 0
        for x in loader:
            total = total + model(x.to(device))
            print(total.item())
    """)
    assert [(f.span.line, f.message.split("(")[1].split(")")[0]) for f in findings(source)] == [(10, "`total`")]


def test_carried_state_fix_syncs_before_a_return_after_the_work():
    fixed = fixed_body("""
        import torch
        import torch_xla
        def first_bad(model, loader, limit):
            worst = 0
            for x in loader:
                worst = torch.maximum(worst, model(x.to(device)))
                if worst.item() > limit:
                    return x
            return None
    """)
    assert "        if worst.item() > limit:\n            torch_xla.sync()\n            return x\n" in fixed
    assert fixed.endswith("            return x\n        torch_xla.sync()\n    return None\n")


def test_a_loop_inside_the_training_step_is_left_to_the_step():
    # The step loop syncs; a loop inside it that sums the gradient norms is part of the step.
    assert (
        findings(
            textwrap.dedent("""
        import torch_xla
        for x in loader:
            model(x).backward()
            norm = 0
            for p in model.parameters():
                norm = norm + p.grad.norm()
                print(norm.item())
            opt.step()
            torch_xla.sync()
    """)
        )
        == []
    )


def test_a_while_test_on_the_carried_state_is_a_read_every_iteration():
    (finding,) = findings(
        textwrap.dedent("""
        import torch
        import torch_xla
        x = torch.ones(4, device=torch_xla.device())
        while x.norm() > 1e-3:
            x = model(x)
    """)
    )
    assert finding.span.line == 5 and "`x`" in finding.message


def test_a_cuda_synchronize_in_the_step_is_the_ports_sync_point():
    """DeiT's step ends with `torch.cuda.synchronize()`, which XLA104 ports to
    `torch_xla.sync()` then `xm.wait_device_ops()`: XLA103 adds no second sync."""
    source = (
        "import torch\n"
        "model = torch.nn.Linear(4, 1).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in range(3):\n"
        "    loss = model(torch.randn(2, 4).cuda()).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    torch.cuda.synchronize()\n"
    )
    assert not [f for f in lint_source(source, "t.py", Settings(), select=["ALL"]) if f.code == CODE]
    fixed = fix_source(source, "t.py", Settings(), unsafe=True).source
    assert fixed.count("torch_xla.sync()") == 1 and "xm.wait_device_ops()" in fixed, fixed
    without = source.replace("    torch.cuda.synchronize()\n", "")
    assert fix_source(without, "t.py", Settings(), unsafe=True).source.count("torch_xla.sync()") == 1
