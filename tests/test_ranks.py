"""The analysis of values that differ between processes (xlalint.analysis.ranks)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from xlalint.analysis.ranks import RankTaint
from xlalint.analysis.semantic import Semantic, attach_parents
from xlalint.engine.config import Settings
from xlalint.engine.context import Context


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


def taint_of(source: str) -> tuple[RankTaint, ast.Module]:
    tree = ast.parse(textwrap.dedent(source))
    attach_parents(tree)
    return RankTaint(Semantic(tree)), tree


def tainted(source: str) -> set[str]:
    """The names (``function.name``, or ``name`` at module level) the rank reaches."""
    taint, tree = taint_of(source)
    scopes = {id(tree): ""} | {id(f): f"{f.name}." for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    scopes |= {id(c): f"{c.name}." for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
    return {scopes[key] + name for key, names in taint.names.items() for name in names}


RANK = "import os\nimport torch\nimport torch_xla.runtime as xr\nrank = xr.global_ordinal()\n"


def test_the_rank_flows_through_data():
    source = RANK + (
        "is_master = rank == 0\n"
        "weight = loss if rank == 0 else 0\n"
        "scaled = weight * 2\n"
        "first, world = rank == 0, xr.world_size()\n"
        "offset = 0\n"
        "offset += rank\n"
    )
    assert tainted(source) == {"rank", "is_master", "weight", "scaled", "first", "offset"}


def test_a_test_that_differs_taints_what_it_guards():
    source = RANK + (
        "should_log = False\n"
        "if rank == 0:\n"
        "    should_log = True\n"
        "    writer, every = make_writer(), 10\n"
        "else:\n"
        "    quiet = True\n"
        "if step == 0:\n"
        "    shared = True\n"
    )
    assert tainted(source) == {"rank", "should_log", "writer", "every", "quiet"}


def test_text_and_checkpoints_do_not_carry_the_rank():
    source = RANK + (
        'ckpt_path = os.path.join(out, f"ckpt_rank{rank}.pt")\n'
        'old_path = "ckpt_rank%d.pt" % rank\n'
        'log_name = "rank" + str(rank)\n'
        'message = "rank {}".format(rank)\n'
        "ckpt = torch.load(ckpt_path)\n"
        'global_step = ckpt["step"]\n'
        'step = torch.load(f"{out}/rank{rank}.pt")["step"]\n'
        'resumed = restore(model, f"{out}/rank{rank}.pt")\n'
        "device_index = str(rank)\n"
    )
    assert tainted(source) == {"rank", "device_index"}


def test_the_taint_follows_a_long_chain_in_any_order():
    # Each assignment reads the next one's target: the names gain the taint from the
    # last line up, one per evaluation.
    chain = "".join(f"v{i} = v{i + 1} + 1\n" for i in range(50))
    source = "import torch_xla.runtime as xr\n" + chain + "v50 = xr.global_ordinal()\n"
    assert tainted(source) == {f"v{i}" for i in range(51)}


def test_parameters_filled_with_the_rank_at_every_call_site():
    source = RANK + (
        "def report(first, step):\n    pass\n"
        "def log(flag):\n    pass\n"
        "report(rank == 0, 1)\nreport(is_master, 2)\nis_master = rank < 1\n"
        "log(rank)\nlog(True)\n"
    )
    assert tainted(source) == {"rank", "is_master", "report.first"}


def test_each_assignment_is_evaluated_a_bounded_number_of_times(monkeypatch):
    # 200 functions each bind and read `rank`: a name tainted in one function must not
    # re-evaluate the readers in every other.
    body = "".join(
        f"def f{i}():\n    rank = xr.global_ordinal()\n    x = rank + 1\n    y = x * 2\n" for i in range(200)
    )
    calls = 0
    differs = RankTaint.differs

    def counted(self, expr):
        nonlocal calls
        calls += 1
        return differs(self, expr)

    monkeypatch.setattr(RankTaint, "differs", counted)
    names = tainted("import torch_xla.runtime as xr\n" + body)
    assert len(names) == 600
    # One evaluation each, and one more for `x = rank + 1` and `y = x * 2` once their
    # function's name gains the taint.
    assert calls <= 2 * 600


def test_program_order_decides_what_a_name_holds_where_it_is_read():
    # llama2.c (issue 38): `iter_num` comes from the resumed checkpoint (the same on every
    # process); the master's later `checkpoint = {...}` does not reach that read.
    source = (
        "import os\n"
        "import torch\n"
        "ddp_rank = int(os.environ['RANK'])\n"
        "master_process = ddp_rank == 0\n"
        "iter_num = 0\n"
        "if init_from == 'resume':\n"
        "    checkpoint = torch.load('ckpt.pt')\n"
        "    iter_num = checkpoint['iter_num']\n"
        "while True:\n"
        "    if master_process:\n"
        "        checkpoint = {'iter_num': iter_num, 'rank': ddp_rank}\n"
        "    iter_num += 1\n"
        "    if iter_num > 10:\n"
        "        break\n"
    )
    names = tainted(source)
    assert "iter_num" not in names and "checkpoint" in names
    # A value assigned under a test that differs still differs where it reaches.
    source = "import os\nrank = int(os.environ['RANK'])\nif rank == 0:\n    n = 1\nelse:\n    n = 2\nm = n + 1\n"
    assert {"n", "m"} <= tainted(source)
