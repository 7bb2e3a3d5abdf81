"""XLA202 missing-distributed-sampler on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixture_fixes,
    assert_unsafe_fixes_leave_nothing_fixable,
    findings_of,
    fixture_positions,
)
from xlalint.engine.config import Settings

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA202"
CODE = "XLA202"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # XRT-era MNIST: the training loader through MpDeviceLoader and a nested loop function; the test loader is not flagged.
    "mp_mnist": [(30, 20, CODE)],
    # A loader returned by a helper, iterated through enumerate(tqdm(...)); eval and sharded loaders are not flagged.
    "launch_tqdm": [(15, 12, CODE)],
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


def training_loader_lines(source: str) -> list[int]:
    """The lines of the DataLoader calls the multi-process analysis calls training loaders."""
    import ast

    from xlalint.analysis.semantic import attach_parents
    from xlalint.engine.context import Context

    tree = ast.parse(source)
    ctx = Context(source, "f.py", tree, Settings(), attach_parents(tree))
    return [loader.call.lineno for loader in ctx.distributed.training_loaders]


@pytest.mark.parametrize(
    "source, lines",
    [
        # self.<attr>, iterated in a method.
        (
            "import torch_xla\nfrom torch.utils.data import DataLoader\n"
            "class T:\n"
            "    def __init__(self):\n"
            "        self.train_dl = DataLoader(ds)\n"
            "        self.eval_dl = DataLoader(ds)\n"
            "    def fit(self):\n"
            "        for x in self.train_dl:\n"
            "            model(x).backward()\n",
            [5],
        ),
        # A parameter every call site fills, through ParallelLoader.per_device_loader.
        (
            "import torch_xla.distributed.parallel_loader as pl\nfrom torch.utils.data import DataLoader\n"
            "def loop(batches):\n"
            "    for x in batches:\n"
            "        model(x).backward()\n"
            "dl = DataLoader(ds)\n"
            "loop(pl.ParallelLoader(dl, [d]).per_device_loader(d))\n",
            [6],
        ),
        # A while loop over next(iterator).
        (
            "import torch_xla\nfrom torch.utils.data import DataLoader\n"
            "it = iter(DataLoader(ds))\n"
            "while True:\n"
            "    x = next(it)\n"
            "    model(x).backward()\n",
            [3],
        ),
        # No training loop in the file: the name decides.
        (
            "import torch_xla\nfrom torch.utils.data import DataLoader\n"
            "train_loader = DataLoader(ds)\nval_loader = DataLoader(ds)\ntrain_eval = DataLoader(ds)\n",
            [3],
        ),
    ],
)
def test_training_loaders(source, lines):
    assert training_loader_lines(source) == lines
