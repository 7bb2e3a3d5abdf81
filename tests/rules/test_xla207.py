"""XLA207 rank-conditional-execution on whole scripts: findings and the unsafe fix.

A hang needs two processes, so these tests are static; the fixed master_logging.py
runs on one CPU device under `xlalint run --compare --unsafe-fixes`."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, findings_of, fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA207"
CODE = "XLA207"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A print of the loss under is_master_ordinal() (unsafe fix: xm.master_print), and
    # under a variable assigned from the ordinal a rendezvous and a host read (no fix).
    "master_logging": [(34, 39, CODE), (37, 13, CODE), (38, 28, CODE)],
    # self.rank from dist.get_rank() (also under an every-N guard), accelerate's
    # is_main_process, an early return on LOCAL_RANK; not a test every process shares.
    "rank_tests": [(21, 22, CODE), (23, 13, CODE), (42, 5, CODE)],
    # The rank only names each process's checkpoint file: the step counter restored from
    # it, and the rendezvous under `global_step % N == 0`, are shared. A value chosen by
    # the rank (`loss if rank == 0 else 0`) and a flag set under a rank test differ.
    "checkpoint_step": [(43, 13, CODE), (49, 13, CODE)],
    # A host read after a sync every process ran copies computed data: not flagged; before
    # the sync (unsafe fix: xm.master_print), after the value is computed again or handed
    # to an in-place collective, or after a sync only the master runs: flagged.
    "read_after_sync": [(17, 38, CODE), (27, 19, CODE), (29, 13, CODE), (30, 19, CODE), (39, 13, CODE), (40, 19, CODE)],
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


def test_the_message_names_the_test_and_its_line():
    path = FIXTURES / "master_logging.py"
    first = findings(path.read_text(), str(path))[0].message
    assert "only where `xm.is_master_ordinal()` (line 33): the run hangs" in first


MP = "import torch_xla\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"


@pytest.mark.parametrize(
    "body",
    [
        # A parameter filled with the ordinal at every call site.
        "def sync_if(rank):\n    if rank == 0:\n        torch_xla.sync()\n"
        "def _mp_fn(index):\n    sync_if(xr.global_ordinal())\n",
        # Transitively through two variables.
        "def _mp_fn(index):\n    r = xr.global_ordinal()\n    first = r == 0\n    if first:\n"
        "        xm.all_reduce('sum', [t])\n",
        # The else branch of a rank test runs on the other processes only.
        "def _mp_fn(index):\n    if xm.is_master_ordinal():\n        pass\n    else:\n        xm.rendezvous('x')\n",
        # A helper the module calls only under a rank test.
        "def evaluate():\n    return xm.all_reduce('sum', [t])\n"
        "def _mp_fn(index):\n    if xm.is_master_ordinal():\n        evaluate()\n",
    ],
    ids=["parameter", "variables", "else", "helper"],
)
def test_values_that_differ_between_processes(body):
    assert len(findings(MP + body, "f.py")) == 1


@pytest.mark.parametrize(
    "body",
    [
        # A parameter some call sites fill with a shared value.
        "def sync_if(first):\n    if first:\n        torch_xla.sync()\n"
        "def _mp_fn(index):\n    sync_if(xr.global_ordinal() == 0)\n    sync_if(True)\n",
        # wait_device_ops only waits for this device.
        "def _mp_fn(index):\n    if xm.is_master_ordinal():\n        xm.wait_device_ops()\n",
        # The world size is the same everywhere.
        "def _mp_fn(index):\n    if xr.world_size() > 1:\n        xm.rendezvous('x')\n",
        # HF's main_process_first: every process reaches one of the two barriers.
        "def main_first(local_rank):\n    if local_rank not in [-1, 0]:\n        xm.rendezvous('first')\n"
        "    yield\n    if local_rank == 0:\n        xm.rendezvous('first')\n",
    ],
    ids=["mixed-call-sites", "wait-device-ops", "world-size", "paired-barriers"],
)
def test_values_every_process_shares(body):
    assert findings(MP + body, "f.py") == []


def test_no_fix_when_the_branch_holds_a_comment():
    source = MP + (
        "def _mp_fn(index):\n    for x in loader:\n        loss = model(x)\n        loss.backward()\n"
        "        xm.optimizer_step(opt)\n        if xm.is_master_ordinal():\n            # why\n            print(loss)\n"
    )
    [finding] = findings(source, "f.py")
    assert finding.fix is None
