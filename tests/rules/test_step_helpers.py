"""Issue 38, item 1: a loop whose backward runs inside a helper it calls (a same-module
function, an object's ``__call__``, timm's ``NativeScaler``, ``accelerator.backward``) is a
training step for XLA102, XLA103 and XLA106; XLA104 reports the CUDA GradScaler the
``NativeScaler`` holds."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rules.fixture_checks import assert_fixture_fixes
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "XLA103"
CODES = ["XLA102", "XLA103", "XLA104", "XLA106"]


def positions(source: str) -> list[tuple[int, int, str]]:
    found = lint_source(source, "train.py", Settings(), select=CODES)
    return [(f.span.line, f.span.col + 1, f.code) for f in found]


def test_steps_through_helpers():
    source = (FIXTURES / "step_helpers.py").read_text()
    assert positions(source) == [
        (36, 5, "XLA103"),  # update(loss, optimizer, 1.0) runs the backward
        (40, 22, "XLA102"),
        (45, 5, "XLA103"),  # stepper(loss): Stepper.__call__ runs it
        (49, 22, "XLA102"),
        (53, 19, "XLA104"),  # NativeScaler() holds a CUDA GradScaler
        (54, 5, "XLA103"),  # loss_scaler(loss, optimizer, ...) runs it
        (58, 9, "XLA106"),  # a clip after the NativeScaler stepped
        (59, 22, "XLA102"),
    ]


def test_sync_fixes_through_helpers():
    assert_fixture_fixes("XLA103", FIXTURES, "step_helpers", unsafe=False)


def test_clip_after_a_native_scaler_has_no_fix():
    # Moving the clip before `loss_scaler(...)` would clip before the backward.
    source = (FIXTURES / "step_helpers.py").read_text()
    (clip,) = [f for f in lint_source(source, "train.py", Settings(), select=["XLA106"])]
    assert clip.fix is None


def test_accelerator_backward_is_a_step():
    source = textwrap.dedent(
        """\
        import torch
        import torch_xla
        from accelerate import Accelerator

        accelerator = Accelerator()
        model, optimizer = accelerator.prepare(torch.nn.Linear(4, 2), torch.optim.SGD([], lr=0.1))
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            print(loss.item())
        """
    )
    assert positions(source) == [(11, 11, "XLA102")]


def test_an_object_without_a_backward_is_no_step():
    source = textwrap.dedent(
        """\
        import torch
        import torch_xla

        class Logger:
            def __call__(self, value):
                print(value)

        log = Logger()
        for x in loader:
            y = model(x.to(torch_xla.device()))
            log(y.sum().item())
        """
    )
    assert positions(source) == []


def test_steps_through_helpers_passed_as_arguments():
    source = (FIXTURES / "passed_helpers.py").read_text()
    # train_one_epoch's `loss_scaler` is bound to a Scaler by main() and by run_epochs
    # (its own parameter, bound to `Scaler()`); train's `step_fn=update`. evaluate's
    # `record` is a Meter (no backward); fit's `step` is bound by no call.
    assert positions(source) == [(39, 5, "XLA103"), (41, 22, "XLA102"), (48, 5, "XLA103")]


def test_sync_fixes_through_helpers_passed_as_arguments():
    assert_fixture_fixes("XLA103", FIXTURES, "passed_helpers", unsafe=False)


PASSED = """\
    import torch
    import torch_xla

    class Stepper:
        def __call__(self, loss):
            loss.backward()
            opt.step()

    class Logger:
        def __call__(self, value):
            print(value)

    def update(loss):
        loss.backward()
        opt.step()

    def train(loader, step):
        for x in loader:
            step(model(x.to(torch_xla.device())).sum())

    def epochs(loader, step):
        for _ in range(3):
            train(loader, step)

    def main():
        {calls}
    """


def passed(calls: str) -> list[tuple[int, int, str]]:
    return positions(textwrap.dedent(PASSED).format(calls=calls))


def test_a_step_passed_on_through_parameters():
    assert passed("epochs(loader, Stepper())") == [(18, 5, "XLA103")]


def test_a_step_function_left_to_its_default():
    source = textwrap.dedent(PASSED).replace("def train(loader, step):", "def train(loader, step=update):")
    assert positions(source.format(calls="train(loader)")) == [(18, 5, "XLA103")]
    # Every call passes another: the default never runs.
    assert positions(source.format(calls="train(loader, Logger())")) == []


def test_any_call_that_passes_a_backward_makes_the_loop_a_step():
    # The loop trains on the second call: it needs its sync there.
    assert passed("train(loader, Logger()); train(loader, update)") == [(18, 5, "XLA103")]


def test_a_callable_without_a_backward_is_no_step():
    assert passed("train(loader, Logger())") == []


def test_a_parameter_no_call_binds_is_no_step():
    # A library entry point: what its callers pass is not known.
    assert passed("pass") == []


def test_a_parameter_shadows_a_module_object_of_the_same_name():
    # `step` in train() is the parameter, not the module's Stepper object.
    source = textwrap.dedent(PASSED).format(calls="train(loader, Logger())") + "step = Stepper()\n"
    assert positions(source) == []


def test_a_scaler_a_trainer_holds():
    source = textwrap.dedent(
        """\
        import torch
        import torch_xla

        class Scaler:
            def __call__(self, loss, optimizer):
                loss.backward()
                optimizer.step()

        class Meter:
            def __call__(self, value):
                self.last = value

        class Trainer:
            def __init__(self, model, optimizer, loss_scaler, record=None):
                self.model = model
                self.optimizer = optimizer
                self.loss_scaler = loss_scaler
                self.record = record
                self.own = Scaler()

            def train_epoch(self, loader):
                for x, y in loader:
                    loss = self.model(x, y)
                    self.loss_scaler(loss, self.optimizer)
                    print(loss.item())

            def own_epoch(self, loader):
                for x, y in loader:
                    self.own(self.model(x, y), self.optimizer)

            def evaluate(self, loader):
                for x, y in loader:
                    self.record(self.model(x, y))

        def main():
            Trainer(model, optimizer, Scaler(), record=Meter()).train_epoch(loader)
        """
    )
    # `self.loss_scaler` holds the `loss_scaler` the construction passes (a Scaler);
    # `self.own` a Scaler built in `__init__`; `self.record` a Meter: no backward.
    assert positions(source) == [(22, 9, "XLA103"), (25, 19, "XLA102"), (28, 9, "XLA103")]


def chain(functions: int) -> str:
    """A step function passed on through ``functions`` functions to the loop that calls it."""
    source = "import torch\nimport torch_xla\n\ndef update(loss):\n    loss.backward()\n    opt.step()\n\n"
    source += "def f0(loader, step):\n    for x in loader:\n        step(model(x).sum())\n\n"
    source += "".join(f"def f{i}(loader, step):\n    f{i - 1}(loader, step)\n\n" for i in range(1, functions))
    return source + f"f{functions - 1}(loader, update)\n"


def test_a_callable_passed_on_is_followed_a_few_functions_deep():
    assert positions(chain(8)) == [(9, 5, "XLA103")]
    # Further than that it is not followed; a long chain is checked, not too deep to check.
    found = lint_source(chain(400), "train.py", Settings())
    assert [f.code for f in found] == []


def test_a_timm_native_scaler_passed_under_another_name():
    source = textwrap.dedent(
        """\
        import torch
        import torch_xla
        from timm.utils import NativeScaler

        def train_one_epoch(model, loader, optimizer, scaler):
            for x, y in loader:
                scaler(model(x, y), optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

        def run(model, loader, optimizer, amp_scaler):
            for epoch in range(3):
                train_one_epoch(model, loader, optimizer, amp_scaler)

        def fit(model, loader, optimizer, step):
            for x, y in loader:
                step(model(x, y), optimizer)

        def main():
            loss_scaler = NativeScaler()
            run(model, loader, optimizer, loss_scaler)
        """
    )
    # `scaler` is bound to `amp_scaler`, bound to the NativeScaler: the loop is a step,
    # and the clip after the scaler stepped is in the wrong order. `fit`'s `step` is
    # bound by no call.
    assert positions(source) == [(6, 5, "XLA103"), (8, 9, "XLA106"), (19, 19, "XLA104")]
    # Not passed on: no step.
    assert positions(
        source.replace("run(model, loader, optimizer, loss_scaler)", "run(model, loader, optimizer, None)")
    ) == [(19, 19, "XLA104")]


def test_the_deit_port_syncs_after_the_loss_scaler_it_is_passed():
    # tests/port_corpus/vit_loss_scaler: main() builds the NativeScaler and passes it to
    # train_one_epoch, whose loop calls it (16 -> 3 compiles in 8 steps once synced).
    corpus = Path(__file__).resolve().parents[1] / "port_corpus" / "vit_loss_scaler" / "train.py"
    result = fix_source(corpus.read_text(), "train.py", Settings(), unsafe=True)
    step = result.source[result.source.index("        loss_scaler(loss, optimizer") :]
    assert step.index("torch_xla.sync()") < step.index("    return {")
    assert "            torch_xla.sync()\n            break\n        torch_xla.sync()\n    return {" in step
    # The `loss.item()` the `math.isfinite` guard needs each step is reported, with no fix.
    assert [(f.code, f.fix) for f in result.remaining] == [("XLA102", None)]


# --- item 2: the step loop is the loop that runs the optimizer step ----------------------


def test_the_step_is_the_loop_that_steps_the_optimizer():
    source = (FIXTURES / "diffusion_loop.py").read_text()
    # The `while` of run_loop (not the micro-batch `for` of forward_backward) misses the
    # sync; the per-parameter `.item()` of the logging helper `optimize` calls is in the
    # step; the one under `if self.step % self.log_interval == 0:` is not.
    assert positions(source) == [(14, 21, "XLA102"), (28, 9, "XLA103")]


def test_the_sync_goes_after_the_optimizer_step():
    assert_fixture_fixes("XLA103", FIXTURES, "diffusion_loop", unsafe=False)


def test_accumulation_in_one_function_syncs_after_the_optimizer_step():
    source = textwrap.dedent(
        """\
        import torch
        import torch_xla

        for it in range(10):
            for micro in range(4):
                loss = model(next(batches)).sum()
                loss.backward()
            opt.step()
            opt.zero_grad()
        """
    )
    fixed = fix_source(source, "train.py", Settings(), select=["XLA103"]).source
    assert fixed.endswith("    opt.zero_grad()\n    torch_xla.sync()\n")
