"""XLA501 optimizer-before-move on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixes_to,
    assert_fixture_fixes,
    expected_fixed,
    findings_of,
    fixture_positions,
)
from xlalint.analysis.training_objects import CALL_DEPTH

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA501"
CODE = "XLA501"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A function (safe fix), a class whose move reads `self.device` set in between (no
    # fix), and parameter groups from `named_parameters()` with a scheduler in between (unsafe).
    "classifier": [(22, 17, CODE), (39, 26, CODE), (50, 17, CODE)],
    # Parameter groups, a parameter list kept for clipping, groups taken before the move
    # with the optimizer built after it (all safe: the move goes above the first), groups
    # with the device assigned in between (they and the optimizer go below the move), and
    # groups taken in another block than the move (no fix).
    "param_groups": [(28, 17, CODE), (36, 17, CODE), (49, 17, CODE), (56, 17, CODE), (66, 21, CODE)],
    # Before a move and an FSDP wrap: built after the wrap (safe); with groups chosen by
    # name (unsafe: FSDP renames the parameters); no fix with a scheduler in between or
    # a wrap bound to another name.
    "fsdp_wrap": [(12, 11, CODE), (24, 11, CODE), (33, 11, CODE), (42, 11, CODE)],
    # Issue 28: moved inside a wrapper module that holds the model (a class of the file,
    # `add_module`, `nn.Sequential`), directly or through the wrapper's name; not for a
    # wrapper that holds no module it is given, or an optimizer built after the move.
    "wrapper_move": [(51, 13, CODE), (61, 13, CODE), (69, 13, CODE), (78, 13, CODE), (86, 13, CODE)],
    # Issue 28: built in one function, moved in another that receives both (the DDP
    # tutorial's Trainer), or in the caller the helper returns both to; no fix.
    "cross_function": [(29, 17, CODE), (56, 11, CODE), (68, 17, CODE)],
    # Issue 38: `return model, opt` passed on with a star, `Runner(*build(lr))`, to a class
    # whose `__init__` moves the model; no fix.
    "star_pair": [(12, 11, CODE)],
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


def test_fixed_script_is_clean_where_a_fix_applied():
    fixed = expected_fixed(FIXTURES, "classifier", unsafe=True)
    assert [f.span.line for f in findings(fixed, "f.py")] == [39]  # the class: no fix


def test_no_parameters_taken_before_the_move_are_left():
    """Issue 33: the fix moved the `.to` between the groups and the optimizer; the groups
    still held the CPU parameters and the finding was gone."""
    fixed = expected_fixed(FIXTURES, "param_groups", unsafe=True)
    assert [(f.span.line, f.fix) for f in findings(fixed, "f.py")] == [(66, None)]
    assert fixed.index("model = model.to(device)") < fixed.index("groups = [")
    assert fixed.index("model.to(torch_xla.device())") < fixed.index("params = list(model.parameters())")


def test_fsdp_wrap_after_the_optimizer_gets_it_built_after_the_wrap():
    """Under torch_xla's FSDP the optimizer belongs after the wrap: moving the `.to` up
    would leave it holding the unsharded parameters."""
    source = (
        "import torch\n"
        "import torch_xla\n"
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
        "model = Net()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model.to(torch_xla.device())\n"
        "model = FSDP(model)\n"
    )
    (finding,) = findings(source, "f.py")
    assert "(FSDP wraps it at line 7)" in finding.message
    fixed = assert_fixes_to(CODE, source, "f.py", _after_wrap(source), unsafe=False)
    # XLA209's finding on the same optimizer (built before the wrap) is gone too.
    assert not [f for f in findings_of("XLA209", fixed, "f.py")]
    assert not findings(fixed, "f.py")


def _after_wrap(source: str) -> str:
    lines = source.splitlines(keepends=True)
    return "".join([*lines[:4], *lines[5:], lines[4]])


def test_fsdp_fixed_script_keeps_only_the_unfixable_findings():
    fixed = expected_fixed(FIXTURES, "fsdp_wrap", unsafe=True)
    assert [(f.span.line, f.fix) for f in findings(fixed, "f.py")] == [(33, None), (42, None)]


def test_a_wrapper_move_goes_above_the_optimizer():
    """Issue 28 (DDPM): `DiffusionTrainer(net_model, ...).to(device)` moves `net_model`;
    the fix moves that statement above the optimizer, unsafe across the scheduler."""
    source = expected_fixed(FIXTURES, "wrapper_move", unsafe=False)
    ddpm = source[source.index("def ddpm") : source.index("def right_after")]
    assert ddpm.index("optim = torch.optim.Adam") < ddpm.index("trainer = DiffusionTrainer")
    fixed = expected_fixed(FIXTURES, "wrapper_move", unsafe=True)
    ddpm = fixed[fixed.index("def ddpm") : fixed.index("def right_after")]
    assert ddpm.index("trainer = DiffusionTrainer") < ddpm.index("optim = torch.optim.Adam")
    # The wrapper built and moved apart (`w = W(model)`, `w.to(dev)`): no fix.
    assert [(f.span.line, f.fix) for f in findings(fixed, "f.py")] == [(69, None), (86, None)]


def test_a_wrapper_read_before_its_move_is_not_moved_up():
    """The move binds `trainer`: a statement in between that reads the earlier `trainer`
    would see the new one."""
    source = (
        "import torch\n"
        "import torch_xla\n"
        "from torch import nn\n"
        "class Wrapper(nn.Module):\n"
        "    def __init__(self, model):\n"
        "        super().__init__()\n"
        "        self.model = model\n"
        "def main(trainer):\n"
        "    model = nn.Linear(2, 2)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    print(trainer)\n"
        "    trainer = Wrapper(model).to(torch_xla.device())\n"
    )
    (finding,) = findings(source, "f.py")
    assert finding.fix is not None and finding.fix.applicability == "unsafe"


def test_a_model_moved_under_another_name_is_moved():
    """`self.model = model.to(dev)` and `net = model.to(dev)` move `model` itself."""
    source = (
        "import torch\n"
        "import torch_xla\n"
        "model = Net()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "net = model.to(torch_xla.device())\n"
    )
    expected = source.replace(
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nnet = model.to(torch_xla.device())\n",
        "net = model.to(torch_xla.device())\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
    )
    assert_fixes_to(CODE, source, "f.py", expected, unsafe=False)


def test_across_functions_the_message_says_where_and_what_to_do():
    path = FIXTURES / "cross_function.py"
    first = findings(path.read_text(), str(path))[0]
    assert first.fix is None
    # What to do (build it after the move, in `Trainer.__init__`) is the explanation's.
    assert first.message == (
        "`optimizer` takes `model`'s parameters before `Trainer.__init__` moves it to XLA (line 12, via lines 48, 50)"
    )


def test_following_calls_is_bounded():
    """A chain of helpers longer than the depth followed is not reported (and each
    helper is looked at once, however many optimizers reach it)."""
    helpers = "".join(f"def step{i}(model, opt):\n    step{i + 1}(model, opt)\n" for i in range(CALL_DEPTH + 1))
    source = (
        "import torch\nimport torch_xla\n"
        + helpers
        + f"def step{CALL_DEPTH + 1}(model, opt):\n    model.to(torch_xla.device())\n"
    )
    near = source + "def main():\n    m = Net()\n    o = torch.optim.SGD(m.parameters())\n    step2(m, o)\n"
    far = source + "def main():\n    m = Net()\n    o = torch.optim.SGD(m.parameters())\n    step0(m, o)\n"
    assert len(findings(near, "f.py")) == 1
    assert not findings(far, "f.py")


def test_moves_under_another_name_or_in_a_wrapper_are_not_xla502s_moves():
    """`moves` (XLA502's) keeps each model's own name; `all_moves` adds the wrapper's and
    the renamed ones, which XLA501 asks: `net.tie_weights()` after `net = model.to(dev)`
    ties the moved model again."""
    source = (
        "import torch_xla\n"
        "from transformers import GPT2LMHeadModel\n"
        "model = GPT2LMHeadModel(config)\n"
        "net = model.to(torch_xla.device())\n"
        "net.tie_weights()\n"
    )
    assert not findings_of("XLA502", source, "f.py")


def test_a_wrapper_of_another_local_module_moves_the_model(tmp_path):
    """Issue 38: the DDPM repository's `GaussianDiffusionTrainer(net_model, ...).to(device)`
    with the class in diffusion.py; `device = torch.device("cuda:0")` is the XLA device
    after the port. With the class in the script's own file it was found already."""
    path = FIXTURES / "project_wrapper" / "train.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.after_port) for f in found] == [(12, 13, True)]
    # The same script already on XLA: reported before any port.
    (tmp_path / "wrap.py").write_text((FIXTURES / "project_wrapper" / "wrap.py").read_text())
    ported = path.read_text().replace('torch.device("cuda:0")', "torch_xla.device()")
    ported = ported.replace("import torch\n", "import torch\nimport torch_xla\n", 1)
    (tmp_path / "train.py").write_text(ported)
    found = findings(ported, str(tmp_path / "train.py"))
    assert [(f.span.line, f.after_port) for f in found] == [(13, False)]
    # A wrapper that keeps no module it is given is not a holder.
    (tmp_path / "wrap.py").write_text(
        (FIXTURES / "project_wrapper" / "wrap.py").read_text().replace("self.model = model", "self.width = 4")
    )
    assert findings(ported, str(tmp_path / "train.py")) == []
