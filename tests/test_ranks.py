"""The analysis of values that differ between processes (xlalint.linter.ranks)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from xlalint.linter.config import Settings
from xlalint.linter.context import Context
from xlalint.linter.semantic import attach_parents


def differs(test: str, setup: str = "") -> bool:
    """Whether the expression ``test``, after the statements ``setup``, differs between
    processes."""
    source = textwrap.dedent(f"import os\nimport torch_xla.runtime as xr\n{setup}\nprobe = ({test})\n")
    tree = ast.parse(source)
    attach_parents(tree)
    ctx = Context(source, "train.py", tree, Settings())
    probe = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign) and n.targets[0].id == "probe")
    return ctx.ranks.differs(probe.value)


@pytest.mark.parametrize(
    "test",
    [
        'int(os.environ.get("RANK", -1)) != -1',  # build-nanogpt's "is this a ddp run?"
        'int(os.environ.get("RANK", -1)) == -1',
        '-1 != int(os.environ.get("RANK", -1))',
        'os.environ.get("RANK") is not None',
        'os.environ.get("LOCAL_RANK") is None',
        '"RANK" in os.environ',
        "xr.global_ordinal() >= 0",
        "xr.global_ordinal() < 0",
        "xr.global_ordinal() > -1",
        "0 <= xr.global_ordinal()",
        "args.local_rank == -1",
        "args.local_rank != -1 and step == 0",
    ],
)
def test_whether_this_is_a_launch_is_the_same_on_every_process(test):
    assert not differs(test)


@pytest.mark.parametrize(
    "test",
    [
        "xr.global_ordinal() == 0",
        "xr.global_ordinal() > 0",  # every process but the first
        "xr.global_ordinal() <= 0",
        "xr.global_ordinal() - 1 == -1",  # the rank is 0
        "xr.global_ordinal() != -1 and xr.global_ordinal() == 0",
        "args.local_rank in [-1, 0]",
        'int(os.environ["RANK"])',
        "rank == 0",
    ],
)
def test_a_test_on_the_rank_differs(test):
    assert differs(test, setup='rank = int(os.environ.get("RANK", -1))')


def test_a_variable_set_from_a_launch_test_is_shared():
    setup = 'ddp = int(os.environ.get("RANK", -1)) != -1\nrank = int(os.environ["RANK"]) if ddp else 0'
    assert not differs("ddp", setup)
    assert differs("rank", setup)
