"""XLA601 torch-xla-on-torch-tpu on whole scripts: a torch_xla trainer moved to TorchTPU."""

from __future__ import annotations

from pathlib import Path

from rules.fixture_checks import assert_fixes_to, findings_of
from xlalint.engine.config import Settings

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA601"
CODE = "XLA601"
TPU = Settings(target_runtime="torch-tpu")


def test_findings_of_a_single_host_trainer():
    path = FIXTURES / "xla_trainer.py"
    found = [
        (f.span.line, f.span.col + 1, f.fix is not None) for f in findings_of(CODE, path.read_text(), str(path), TPU)
    ]
    assert found == [
        (16, 17, True),  # torch.compile(backend="openxla")
        (26, 5, True),  # torch_xla.manual_seed
        (27, 14, True),  # torch_xla.device()
        (31, 14, False),  # MpDeviceLoader: reported with what to do instead
        (37, 9, True),  # xm.optimizer_step: one process, so opt.step()
        (38, 9, True),  # torch_xla.sync()
        (42, 5, True),  # xm.wait_device_ops()
        (43, 5, True),  # xm.master_print
        (44, 5, True),  # xm.save
    ]


def test_fix_of_a_single_host_trainer():
    path = FIXTURES / "xla_trainer.py"
    expected = (FIXTURES / "xla_trainer.unsafe.py").read_text()
    assert_fixes_to(CODE, path.read_text(), str(path), path.read_text(), unsafe=False, settings=TPU)
    assert_fixes_to(CODE, path.read_text(), str(path), expected, unsafe=True, settings=TPU)


def test_a_multi_process_script_keeps_its_reduction_and_master_to_the_user():
    source = (
        "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
        "def _mp_fn(index):\n    xm.optimizer_step(opt)\n    xm.save(model.state_dict(), 'm.pt')\n"
        "if __name__ == '__main__':\n    torch_xla.launch(_mp_fn)\n"
    )
    found = {f.span.line: f.fix for f in findings_of(CODE, source, "t.py", TPU)}
    assert found[5] is None and found[6] is None and found[8] is None


def test_not_a_finding_when_the_port_targets_torch_xla():
    path = FIXTURES / "xla_trainer.py"
    assert findings_of(CODE, path.read_text(), str(path), Settings()) == []
