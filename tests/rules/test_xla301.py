"""XLA301 partial-last-batch on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixes_to,
    assert_fixture_fixes,
    assert_unsafe_fixes_leave_nothing_fixable,
    findings_of,
    fixture_positions,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA301"
CODE = "XLA301"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # The training loader of the MNIST script; the test loader is left alone.
    "mp_mnist": [(30, 20, CODE)],
    # `drop_last=False` replaced (reported at the keyword); batches taken with next(); the val loader is left alone.
    "single_xla": [(19, 9, CODE)],
    # Program order: the evaluation loader bound to the same name later is not a training
    # loader, and gets no drop_last (issue 31; issue 33, 2.4).
    "eval_reuses_name": [(12, 14, CODE)],
    # The loop iterates `pl.MpDeviceLoader(train_loader, device) if on_xla else train_loader`.
    "device_loader_or_plain": [(13, 20, CODE)],
    # RULES.md "XLA301 (turn 5)": an accelerate script meant for TPU; the loader whose
    # RandomSampler draws 800 samples in batches of 8 is not reported.
    "accelerate_tpu": [(15, 24, CODE)],
    # Issue 28: the DDP tutorial's loader, returned by a helper and iterated by a
    # `Trainer` method as `self.train_data` (given at `Trainer(model, train_data, ...)`):
    # flagged in the helper; the evaluation loader passed to another method is not.
    "loader_from_helper": [(50, 12, CODE)],
    # Issue 38: `return DataLoader(..., shuffle=True), DataLoader(...)`, unpacked by the
    # caller into `train_loader, val_loader` and passed to the function that loops: the first.
    "loaders_pair": [(13, 12, CODE)],
}


def findings(source: str, path: str):
    return findings_of(CODE, source, path)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_unsafe_fixes_leave_nothing_fixable():
    assert_unsafe_fixes_leave_nothing_fixable(CODE, FIXTURES, EXPECTED)


def loader_findings(options: str, loader_args: str = "ds, batch_size=8, **kwargs") -> list[str]:
    source = (
        "import torch_xla\n"
        "from torch.utils.data import DataLoader\n"
        f"{options}\n"
        f"for x, y in DataLoader({loader_args}):\n"
        "    model(x, y).backward()\n"
    )
    return [f.message for f in findings(source, "train.py")]


@pytest.mark.parametrize(
    "options",
    [
        'kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}',
        "kwargs = dict(num_workers=1, pin_memory=True)",
        'kwargs = {"batch_size": 8}\nif use_cuda:\n    kwargs.update({"num_workers": 1})',
        'kwargs = {}\nkwargs["num_workers"] = 2\nprint(kwargs.get("num_workers"))',
        'base = {"shuffle": True}\nkwargs = {**base, "num_workers": 1}',
        "kwargs = {}\nkwargs.update(dict(pin_memory=True), num_workers=1)",
    ],
)
def test_unpacked_options_the_file_builds_are_read(options):
    assert len(loader_findings(options)) == 1


@pytest.mark.parametrize(
    "options",
    [
        # A branch sets drop_last or a batch sampler.
        'kwargs = {"drop_last": True} if use_cuda else {}',
        'kwargs = {}\nif xla:\n    kwargs["batch_sampler"] = sampler',
        "kwargs = {}\nkwargs.update(drop_last=True)",
        'kwargs = {"batch_size": None, "sampler": s}',
        # What the file does not build, or changes in ways not followed.
        "kwargs = load_options()",
        'kwargs = {"num_workers": 1}\nconfigure(kwargs)',
        'kwargs = {"num_workers": 1}\nkwargs.setdefault("drop_last", True)',
        'kwargs = {"num_workers": 1}\nkwargs[key] = value',
        "kwargs = {name: 1}",
        'kwargs = {"num_workers": 1}\nkwargs |= extra',
    ],
)
def test_unpacked_options_that_may_drop_or_are_unknown_are_not_flagged(options):
    assert loader_findings(options) == []


def test_the_fix_goes_before_the_unpacked_options():
    source = (
        "import torch_xla\n"
        "from torch.utils.data import DataLoader\n"
        'kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}\n'
        "for x, y in DataLoader(ds, batch_size=8, **kwargs):\n"
        "    model(x, y).backward()\n"
    )
    fixed = assert_fixes_to(CODE, source, "train.py", source.replace("8, **", "8, drop_last=True, **"), unsafe=True)
    assert findings(fixed, "train.py") == []


def test_a_sampler_that_drops_says_the_loader_still_does_not():
    sampler = "DistributedSampler(ds, num_replicas=2, rank=0, drop_last=True)"
    imports = "from torch.utils.data import DistributedSampler\n"
    for options, args in (
        (f"{imports}sampler = {sampler}", "ds, batch_size=8, sampler=sampler"),
        (imports, f"ds, batch_size=8, sampler={sampler}"),
    ):
        (message,) = loader_findings(options, args)
        assert "its sampler's `drop_last=True` evens out the processes" in message
    # A sampler that keeps its remainder: the usual message.
    (message,) = loader_findings(imports, "ds, batch_size=8, sampler=DistributedSampler(ds)")
    assert "sampler" not in message
