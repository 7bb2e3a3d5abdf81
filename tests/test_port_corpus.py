"""The port corpus (tests/port_corpus/): small CUDA training scripts of the kinds people
port, each run as written on the CPU, ported with `xlalint fix --unsafe-fixes`, and run
again on torch_xla CPU. A port counts when the fixed files parse, a second fix changes
nothing, the fixed script exits 0 with its parameters on the XLA device, and its last
logged loss is within 3% of the original's loss at the same step.

Each script prints `device <where its parameters are>` once and `step N loss X` per
optimizer step, with its seed fixed, so the two runs can be compared step for step.
"""

from __future__ import annotations

import ast
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parent / "port_corpus"
RELATIVE_TOLERANCE = 0.03
STEP_LINE = re.compile(r"^step (\d+) loss (\S+)", re.MULTILINE)
DEVICE_LINE = re.compile(r"^device (\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Case:
    folder: str
    script: str  # the entry point, run from inside the folder


CASES = {
    "gan_tensor_types": Case("gan_tensor_types", "wgan_gp.py"),
    "lm_sampling": Case("lm_sampling", "train.py"),
    "vit_loss_scaler": Case("vit_loss_scaler", "train.py"),
    "hf_trainer_labels": Case("hf_trainer_labels", "finetune.py"),
    "ddp_torchrun": Case("ddp_torchrun", "train.py"),
    "amp_grad_scaler": Case("amp_grad_scaler", "train.py"),
    "notebook_export": Case("notebook_export", "cifar_cnn.py"),
    "argparse_flags": Case("argparse_flags", "main.py"),
}
FAST = {"amp_grad_scaler"}  # in the default run; the others are marked slow


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str

    def losses(self) -> dict[int, float]:
        return {int(step): float(loss) for step, loss in STEP_LINE.findall(self.stdout)}

    def device(self) -> str | None:
        found = DEVICE_LINE.findall(self.stdout)
        return found[-1] if found else None

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stdout (tail)\n{self.stdout[-2000:]}\n--- stderr (tail)\n{self.stderr[-4000:]}"


def _environment(*, xla: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_DEVICE", "XLA_FLAGS", "USE_TORCH_XLA")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU host, also on a machine with a GPU
    env["PYTHONHASHSEED"] = "0"
    if xla:
        env.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")
    else:
        env["USE_TORCH_XLA"] = "0"  # transformers would pick the XLA device when torch_xla is importable
    return env


def _run_script(folder: Path, script: str, *, xla: bool) -> Run:
    done = subprocess.run(
        [sys.executable, script],
        cwd=folder,
        env=_environment(xla=xla),
        capture_output=True,
        text=True,
        timeout=900,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def _fix(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xlalint", "fix", "--unsafe-fixes", "--no-cache", str(folder)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _sources(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*.py"))}


def port_and_compare(case: Case, tmp_path: Path) -> None:
    """Run the original on the CPU, port a copy with `fix --unsafe-fixes`, run the port on
    torch_xla CPU, and compare: parses, idempotent, exit 0, XLA device, last loss."""
    original = tmp_path / "original"
    port = tmp_path / "port"
    shutil.copytree(CORPUS / case.folder, original)
    shutil.copytree(CORPUS / case.folder, port)

    reference = _run_script(original, case.script, xla=False)
    assert reference.returncode == 0, f"the original does not run on the CPU:\n{reference.explain()}"
    assert reference.device() == "cpu", reference.explain()
    reference_losses = reference.losses()
    assert reference_losses, f"the original logs no `step N loss X` line:\n{reference.explain()}"

    first = _fix(port)
    assert first.returncode in (0, 1), first.stderr
    fixed = _sources(port)
    assert fixed != _sources(original), "the fix changed nothing"
    for name, text in fixed.items():
        ast.parse(text, filename=name)
    second = _fix(port)
    assert second.returncode in (0, 1), second.stderr
    assert _sources(port) == fixed, "a second `fix --unsafe-fixes` changed the fixed files"

    ported = _run_script(port, case.script, xla=True)
    assert ported.returncode == 0, f"the port fails on torch_xla CPU:\n{ported.explain()}"
    assert (ported.device() or "").startswith("xla"), f"the port did not train on XLA:\n{ported.explain()}"
    ported_losses = ported.losses()
    assert ported_losses, f"the port logs no `step N loss X` line:\n{ported.explain()}"
    step = max(ported_losses)
    assert step in reference_losses, f"step {step} is logged by the port, not by the original"
    expected, got = reference_losses[step], ported_losses[step]
    print(f"{case.folder}: step {step} loss {got} on XLA, {expected} on the CPU")  # shown by pytest -rP
    assert math.isfinite(got), f"step {step}: loss {got} on XLA"
    assert abs(got - expected) <= RELATIVE_TOLERANCE * abs(expected), (
        f"step {step}: loss {got} on XLA, {expected} on the CPU (more than {RELATIVE_TOLERANCE:.0%} apart)"
    )


def test_every_corpus_folder_is_a_case():
    assert sorted(p.name for p in CORPUS.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(CASES)
    for case in CASES.values():
        assert (CORPUS / case.folder / case.script).is_file()


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name in FAST else pytest.mark.slow) for name in CASES])
def test_port_runs_on_xla_with_the_same_losses(tmp_path, name):
    pytest.importorskip("torch_xla")
    port_and_compare(CASES[name], tmp_path)
