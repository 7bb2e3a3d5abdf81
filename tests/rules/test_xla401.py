"""XLA401 deprecated-api on whole scripts: findings, the safe fix, and the target version."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, fixture_positions
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA401"
CODE = "XLA401"

# case -> the (line, column, code) of every finding at the default target (2.9).
EXPECTED = {
    # A torch_xla 1.x multi-process MNIST: `xm.xla_device()` and `xm.mark_step()` are
    # deprecated (2.8); its `xrt_world_size`/`get_ordinal` are removed (XLA402), not deprecated.
    "mp_mnist_legacy": [(31, 14, CODE), (42, 5, CODE)],
}


def findings(source: str, path: str = "f.py", target: tuple[int, int] = (2, 9)):
    settings = Settings(target_version=target)
    return [f for f in lint_source(source, path, settings, select=[CODE]) if f.code == CODE]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_fixed_files_are_clean():
    for case in EXPECTED:
        assert findings((FIXTURES / f"{case}.fixed.py").read_text()) == []


LEGACY = (FIXTURES / "mp_mnist_legacy.py").read_text()


@pytest.mark.parametrize(
    ("target", "names"),
    [
        ((2, 4), []),
        # 2.5 and 2.6 warn for xrt_world_size/get_ordinal (removed in 2.7).
        ((2, 5), ["xm.xrt_world_size()", "xm.get_ordinal()", "xm.xrt_world_size()", "xm.get_ordinal()"]),
        ((2, 6), ["xm.xrt_world_size()", "xm.get_ordinal()", "xm.xrt_world_size()", "xm.get_ordinal()"]),
        ((2, 7), []),
        ((2, 8), ["xm.xla_device()", "xm.mark_step()"]),
        ((3, 0), ["xm.xla_device()", "xm.mark_step()"]),
    ],
)
def test_target_version(target, names):
    found = findings(LEGACY, target=target)
    assert [f.message.split("`")[1] for f in found] == names


def test_messages_name_the_replacement():
    (device, sync) = findings(LEGACY)
    assert "deprecated since torch_xla 2.8" in device.message
    assert "`torch_xla.device`" in device.message
    assert "`torch_xla.sync`" in sync.message


@pytest.mark.parametrize(
    "source",
    [
        "from torch_xla.core.xla_model import mark_step as ms\nms()\n",
        "import torch_xla.core.xla_model\ntorch_xla.core.xla_model.mark_step()\n",
        "from torch_xla.core import xla_model\nxla_model.mark_step()\n",
    ],
)
def test_resolved_through_imports(source):
    result = fix_source(source, "f.py", Settings(), select=[CODE])
    assert "torch_xla.sync()" in result.source
    assert "mark_step" not in result.source.split("\n", 2)[-1]
    assert findings(result.source) == []


def test_reference_without_call_is_renamed_when_drop_in():
    source = "import torch_xla.core.xla_model as xm\nhooks = [xm.mark_step]\n"
    (finding,) = findings(source)
    assert finding.fix is not None
    result = fix_source(source, "f.py", Settings(), select=[CODE])
    assert "hooks = [torch_xla.sync]" in result.source
