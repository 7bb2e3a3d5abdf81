"""`target-runtime = "torch-tpu"`: the port writes TorchTPU code (torch-tpu 0.2.0).

No TPU is here and TorchTPU cannot run on a CPU host (with torch 2.13.0 and torch-tpu
0.2.0, `import torch` itself fails while loading the TPU plugin), so these tests check
what can be checked without one: what each fix writes, that every TorchTPU name it
writes is in the 0.2.0 wheel's public API and not internal there, that the rules which
do not apply stay quiet, and that the default (torch-xla) is untouched.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xlalint.engine.config import ConfigError, Settings, parse_target_runtime
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.engine.runtimes import TORCH_TPU_SCOPE, runs_under
from xlalint.rules import all_rules
from xlalint.rules._torch_tpu_api import CUDA_TO_TPU, DISTRIBUTED_BACKEND, written_names
from xlalint.rules.xla104.torch_tpu import TORCH_TPU_INVALID, TORCH_TPU_VALID
from xlalint.rules.xla601_torch_xla_on_torch_tpu import CALLS

ROOT = Path(__file__).resolve().parents[1]
API = json.loads((ROOT / "xlalint" / "rules" / "data" / "torch_tpu_api.json").read_text(encoding="utf-8"))
TPU = Settings(target_runtime="torch-tpu")
CUDA_EXAMPLE = ROOT / "examples" / "cuda_port.py"


def public(name: str) -> bool:
    """``torch.tpu.X``: in the wheel's public table and not internal; ``torch.accelerator.X``:
    what TorchTPU itself names as the replacement of an internal ``torch.tpu`` name."""
    if name.startswith("torch.tpu."):
        module, _, attribute = name.rpartition(".")
        return attribute in API["modules"].get(module, []) and attribute not in API["internal"]
    if name.startswith("torch.accelerator."):
        return name in {entry["prefer"] for entry in API["internal"].values()}
    return False


def tpu_names(source: str) -> set[str]:
    """The ``torch.tpu.*`` and ``torch.accelerator.*`` names a source uses."""
    return set(re.findall(r"\btorch\.(?:tpu|accelerator)(?:\.[A-Za-z_]+)+", source))


def test_every_name_a_fix_writes_is_public_in_torch_tpu_0_2_0():
    assert API["torch_tpu"] == "0.2.0"
    written = written_names() | {
        name.replace("{torch}", "torch").split("(")[0]
        for template, _ in CALLS.values()
        if template
        for name in [template]
    }
    written = {name for name in written if name.startswith(("torch.tpu.", "torch.accelerator."))}
    assert written, "no TorchTPU name found in the tables"
    assert {name for name in written if not public(name)} == set()
    assert DISTRIBUTED_BACKEND in API["distributed_backends"]


def test_the_internal_device_queries_are_ported_to_torch_accelerator():
    # torch-tpu 0.2.0 raises on `torch.tpu.is_available()` from user code (torch >= 2.11).
    for cuda in ("is_available", "device_count", "synchronize", "current_device", "set_device"):
        target = CUDA_TO_TPU[cuda].target
        assert target and target.startswith("torch.accelerator."), cuda
        assert API["internal"][cuda]["prefer"] == target


@pytest.mark.parametrize("index", range(len(TORCH_TPU_VALID)))
def test_xla104_valid_on_torch_tpu(index):
    code = TORCH_TPU_VALID[index].code
    assert [f for f in lint_source(code, "example.py", TPU) if f.code == "XLA104"] == []


@pytest.mark.parametrize("index", range(len(TORCH_TPU_INVALID)))
def test_xla104_invalid_on_torch_tpu(index):
    example = TORCH_TPU_INVALID[index]
    findings = [f for f in lint_source(example.code, "example.py", TPU) if f.code == "XLA104"]
    assert len(findings) == example.count, [f.message for f in findings]
    assert all(f.fix is None or f.fix.applicability == "unsafe" for f in findings)
    # Every TorchTPU fix is unsafe: the safe fix changes nothing.
    assert fix_source(example.code, "example.py", TPU, select=["XLA104"]).source == example.code
    fixed = fix_source(example.code, "example.py", TPU, unsafe=True, select=["XLA104"])
    assert fixed.error is None and fixed.source == example.unsafe_fixed
    ast.parse(fixed.source)
    again = fix_source(fixed.source, "example.py", TPU, unsafe=True, select=["XLA104"])
    assert again.source == fixed.source


def test_rules_of_torch_xla_only_stay_quiet_on_torch_tpu():
    source = CUDA_EXAMPLE.read_text(encoding="utf-8")
    xla = {f.code for f in lint_source(source, "cuda_port.py", Settings())}
    tpu = {f.code for f in lint_source(source, "cuda_port.py", TPU)}
    assert {"XLA103", "XLA201"} <= xla
    assert tpu == {"XLA104"}
    # XLA601 is TorchTPU's only; every rule has a decision for TorchTPU.
    assert not runs_under("XLA601", "torch-xla") and runs_under("XLA601", "torch-tpu")
    assert {rule.code for rule in all_rules()} <= set(TORCH_TPU_SCOPE)


def test_the_cuda_example_ports_to_torch_tpu_and_then_passes_check():
    source = CUDA_EXAMPLE.read_text(encoding="utf-8")
    fixed = fix_source(source, "cuda_port.py", TPU, unsafe=True)
    assert fixed.error is None
    ast.parse(fixed.source)
    code = fixed.source.split('"""', 2)[2]  # after the module's docstring
    assert "torch_xla" not in code and "cuda" not in code
    assert tpu_names(fixed.source) == {
        "torch.tpu.manual_seed",
        "torch.accelerator.is_available",
        "torch.accelerator.synchronize",
    }
    assert all(public(name) for name in tpu_names(fixed.source))
    assert 'torch.amp.autocast("tpu", dtype=torch.bfloat16)' in fixed.source
    # The training loop keeps its statements, less the scaler.
    assert "loss.backward()" in fixed.source and "optimizer.step()" in fixed.source
    assert lint_source(fixed.source, "cuda_port.py", TPU) == []


def test_a_torch_xla_script_migrates_to_torch_tpu():
    source = (ROOT / "examples" / "grad_accumulation_sync.py").read_text(encoding="utf-8")
    fixed = fix_source(source, "grad_accumulation_sync.py", TPU, unsafe=True)
    assert fixed.error is None
    assert "torch_xla" not in fixed.source.split('"""', 2)[2]
    assert 'device = torch.device("tpu")' in fixed.source
    assert lint_source(fixed.source, "grad_accumulation_sync.py", TPU) == []
    # The default target still ports it to torch_xla, byte for byte as before.
    assert fix_source(source, "grad_accumulation_sync.py", Settings(), unsafe=True).source != fixed.source


def test_inductor_named_on_torch_tpu_and_the_default_backend_is_left():
    source = 'import torch\na = torch.compile(m)\nb = torch.compile(m, backend="inductor")\n'
    findings = [f for f in lint_source(source, "t.py", TPU) if f.code == "XLA305"]
    assert [f.span.line for f in findings] == [3]
    fixed = fix_source(source, "t.py", TPU, unsafe=True, select=["XLA305"]).source
    assert fixed.endswith('b = torch.compile(m, backend="tpu")\n')


def test_target_runtime_values():
    assert parse_target_runtime("torch-tpu") == "torch-tpu"
    with pytest.raises(ConfigError, match=r'must be "torch-xla" or "torch-tpu".*did you mean `torch-tpu`'):
        parse_target_runtime("torch_tpu")


def test_target_runtime_from_the_config_and_the_command_line(tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(CUDA_EXAMPLE, script)
    (tmp_path / "xlalint.toml").write_text('target-runtime = "torch-tpu"\n', encoding="utf-8")

    def check(*options: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "xlalint", "check", "--no-cache", "--output-format", "concise", *options]
        return subprocess.run([*command, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)

    from_config = check()
    assert "on TorchTPU" in from_config.stdout and "XLA103" not in from_config.stdout
    overridden = check("--target-runtime", "torch-xla")
    assert "XLA103" in overridden.stdout and "TorchTPU" not in overridden.stdout
    settings = subprocess.run(
        [sys.executable, "-m", "xlalint", "check", "--show-settings", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert 'target-runtime = "torch-tpu"' in settings.stdout
    bad = check("--target-runtime", "tpu")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        'xlalint: error: `--target-runtime` must be "torch-xla" or "torch-tpu", got \'tpu\' (did you mean `torch-tpu`?)'
    ]


def test_a_cuda_trainer_ports_its_device_option_and_tests_with_it():
    fixtures = ROOT / "tests" / "fixtures" / "torch_tpu"
    source = (fixtures / "cuda_trainer.py").read_text(encoding="utf-8")
    expected = (fixtures / "cuda_trainer.unsafe.py").read_text(encoding="utf-8")
    fixed = fix_source(source, "cuda_trainer.py", TPU, unsafe=True)
    assert fixed.error is None and fixed.source == expected
    assert fix_source(expected, "cuda_trainer.py", TPU, unsafe=True).source == expected
    # The option's default, its choices and the test of the device type change together.
    assert 'default="tpu", choices=["tpu", "cpu"]' in expected and 'device.type == "tpu"' in expected
    assert all(public(name) for name in tpu_names(expected))
    # What has no TorchTPU counterpart stays reported, never replaced by a number.
    (left,) = lint_source(expected, "cuda_trainer.py", TPU)
    assert "max_memory_allocated" in left.message and left.fix is None


@pytest.mark.parametrize("name", ["amp_grad_scaler/train.py", "ddp_torchrun/train.py", "vit_loss_scaler/train.py"])
def test_ports_of_the_corpus_to_torch_tpu(name):
    """Three CUDA scripts of the port corpus, ported to TorchTPU: code that parses, names
    only TorchTPU 0.2.0's public API, keeps every statement of the training loop that is
    not CUDA's, and passes `check` with the same target."""
    path = ROOT / "tests" / "port_corpus" / name
    source = path.read_text(encoding="utf-8")
    fixed = fix_source(source, str(path), TPU, unsafe=True)
    assert fixed.error is None, fixed.error
    tree = ast.parse(fixed.source)
    assert "torch_xla" not in fixed.source and "torch.cuda" not in fixed.source
    assert all(public(n) for n in tpu_names(fixed.source)), tpu_names(fixed.source)
    assert lint_source(fixed.source, str(path), TPU) == []
    # The loop keeps its backward and optimizer step (the scaler's are folded into them).
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert any(c.endswith(".backward") for c in calls) and any(c.endswith(".step") for c in calls)


@pytest.mark.parametrize("name", ["cuda_port.py", "dynamic_padding.py", "grad_accumulation_sync.py", "item_logging.py"])
def test_the_readme_examples_port_to_torch_tpu_and_pass_check(name):
    path = ROOT / "examples" / name
    fixed = fix_source(path.read_text(encoding="utf-8"), str(path), TPU, unsafe=True)
    assert fixed.error is None, fixed.error
    code = fixed.source.split('"""', 2)[2]  # after the module's docstring
    ast.parse(fixed.source)
    assert "torch_xla" not in code and "torch.cuda" not in code
    assert all(public(n) for n in tpu_names(code))
    assert lint_source(fixed.source, str(path), TPU) == []
