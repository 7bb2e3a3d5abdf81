"""Before a run: is torch/torch_xla installed (with matching versions), and which device?

Nothing here imports torch. The installed versions and plugins are read by a small
probe run in the interpreter that will run the script (``XLALINT_PYTHON``, default
the one running xlalint): it only asks ``importlib.metadata``/``find_spec``, which
costs tens of milliseconds, where importing torch_xla costs seconds. The hardware is
looked for in ``/dev`` and ``/sys``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from xlalint.install_hint import install_command

INSTALL_HINT = f"{install_command('harness')} (torch==2.9.0 torch-xla==2.9.0)"
TESTED_TORCH_XLA = "2.9"
PYTHON_ENV = "XLALINT_PYTHON"

# Google's PCI vendor id; torch_xla counts TPU chips the same way (_internal/tpu.py).
_GOOGLE_PCI_VENDOR = "0x1ae0"

_PROBE = r"""
import importlib.metadata as md, importlib.util, json, os, sys

def version(*names):
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            pass
    return None

def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False

def xla_plugins():
    try:
        return sorted(ep.name.lower() for ep in md.entry_points(group="torch_xla.plugins"))
    except Exception:
        return []

def pjrt_cuda_library():
    # A bare PJRT CUDA plugin (PyPI xla-cuda12-pjrt) registers the entry point group
    # `xla_plugins`, not `torch_xla.plugins`: torch_xla does not load it by itself.
    try:
        points = [ep for ep in md.entry_points(group="xla_plugins") if "cuda" in ep.name.lower()]
    except Exception:
        return None
    for ep in points:
        spec = importlib.util.find_spec(ep.value) if found(ep.value) else None
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for name in sorted(os.listdir(folder)):
                if name.endswith(".so") and "pjrt" in name:
                    return os.path.join(folder, name)
    return None

def bundled_libtpu():
    spec = importlib.util.find_spec("torch_xla") if found("torch_xla") else None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if os.path.isfile(os.path.join(folder, "lib", "libtpu.so")):
            return True
    return False

print(json.dumps({
    "python": sys.version.split()[0],
    "torch": found("torch"),
    "torch_xla": found("torch_xla"),
    "torch_version": version("torch"),
    "torch_xla_version": version("torch_xla", "torch-xla"),
    "libtpu": bool(os.environ.get("TPU_LIBRARY_PATH")) or found("libtpu") or bundled_libtpu(),
    "xla_plugins": xla_plugins(),
    "cuda_plugin_module": found("torch_xla_cuda_plugin"),
    "cuda_pjrt_library": pjrt_cuda_library(),
}))
"""


#: Set for the child when it must register a bare PJRT CUDA library (bootstrap.py).
CUDA_LIBRARY_ENV = "XLALINT_CUDA_PJRT_LIBRARY"


class HarnessEnvironmentError(Exception):
    """The script cannot be run here; the message says why in one line."""


@dataclass(frozen=True)
class Probe:
    """What the child interpreter has installed."""

    python: str
    torch: bool
    torch_xla: bool
    torch_version: str | None
    torch_xla_version: str | None
    libtpu: bool
    xla_plugins: list[str] = field(default_factory=list)
    cuda_plugin_module: bool = False
    #: The ``.so`` of a bare PJRT CUDA plugin (xla-cuda12-pjrt), which the child's
    #: bootstrap registers with ``torch_xla.experimental.plugins``.
    cuda_pjrt_library: str | None = None

    @property
    def cuda_plugin(self) -> bool:
        return "cuda" in self.xla_plugins or self.cuda_plugin_module or self.cuda_pjrt_library is not None


@dataclass(frozen=True)
class Hardware:
    """Accelerators visible on this machine."""

    tpu_chips: int
    gpu: bool


@dataclass(frozen=True)
class Device:
    name: str  # "CPU" | "TPU" | "CUDA": the PJRT_DEVICE value
    env: dict[str, str]


def child_python() -> str:
    return os.environ.get(PYTHON_ENV) or sys.executable


def probe_interpreter(python: str, env: dict[str, str] | None = None) -> Probe:
    done = run_probe(python, _PROBE, (), env, 60, f"cannot start the Python interpreter {python}")
    if done.returncode != 0:
        raise HarnessEnvironmentError(f"the Python interpreter {python} failed: {last_error_line(done)}")
    return Probe(**json.loads(done.stdout.strip().splitlines()[-1]))


def run_probe(
    python: str, code: str, args: tuple[str, ...], env: dict[str, str] | None, timeout: float, cannot_start: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code *args`` (no stdin), its output captured as text; one that
    cannot start or does not end in ``timeout`` seconds is the one-line error
    ``"<cannot_start>: <why>"``."""
    try:
        return subprocess.run(
            [python, "-c", code, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise HarnessEnvironmentError(f"{cannot_start}: {error}") from error


def last_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The last line a failed probe wrote to stderr: its exception, as a line."""
    return (done.stderr.strip().splitlines() or ["no output"])[-1]


def check_torch_xla(probe: Probe) -> list[str]:
    """Raise when torch/torch_xla cannot work; return warnings (one line each)."""
    if not probe.torch:
        raise HarnessEnvironmentError(f"torch is not installed: {INSTALL_HINT}")
    if not probe.torch_xla:
        raise HarnessEnvironmentError(f"torch_xla is not installed: {INSTALL_HINT}")
    torch_release = _release(probe.torch_version)
    xla_release = _release(probe.torch_xla_version)
    if torch_release and xla_release and torch_release[:2] != xla_release[:2]:
        # torch_xla is built against one torch release; a different one fails to load
        # (undefined symbols) or misbehaves. pip does not enforce the pairing.
        raise HarnessEnvironmentError(
            f"torch {probe.torch_version} does not match torch_xla {probe.torch_xla_version}: {INSTALL_HINT}"
        )
    warnings = []
    if xla_release and ".".join(map(str, xla_release[:2])) != TESTED_TORCH_XLA:
        warnings.append(
            f"warning: torch_xla {probe.torch_xla_version} is not the tested "
            f"{TESTED_TORCH_XLA}; metric and debug formats may differ"
        )
    return warnings


def _release(version: str | None) -> tuple[int, ...] | None:
    """``"2.9.0+cpu"`` -> ``(2, 9, 0)``."""
    if not version:
        return None
    numbers = []
    for part in version.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers) or None


def detect_hardware() -> Hardware:
    return Hardware(tpu_chips=_count_tpu_chips(), gpu=_gpu_present())


def _count_tpu_chips() -> int:
    # /dev/accel* on TPU v2-v4, /dev/vfio/<n> on v5e and later.
    devices = glob.glob("/dev/accel*") + [p for p in glob.glob("/dev/vfio/*") if os.path.basename(p).isdigit()]
    if devices:
        return len(devices)
    chips = 0
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            if Path(vendor).read_text().strip() == _GOOGLE_PCI_VENDOR:
                chips += 1
        except OSError:
            continue
    return chips


def _gpu_present() -> bool:
    if os.path.exists("/dev/nvidia0"):
        return True
    nvidia_smi = shutil.which("nvidia-smi")
    if not nvidia_smi:
        return False
    try:
        listed = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "GPU" in listed


def choose_device(requested: str, probe: Probe, hardware: Hardware) -> Device:
    """The PJRT device for ``--device requested`` (auto|cpu|tpu|cuda)."""
    requested = requested.lower()
    if requested == "cpu":
        return _cpu()
    if requested == "tpu":
        if not probe.libtpu:
            raise HarnessEnvironmentError("--device tpu: libtpu is not installed (pip install 'torch-xla[tpu]==2.9.0')")
        if not hardware.tpu_chips:
            raise HarnessEnvironmentError(
                "--device tpu: no TPU chips found on this machine (no /dev/accel*, /dev/vfio/*)"
            )
        return Device("TPU", {"PJRT_DEVICE": "TPU"})
    if requested == "cuda":
        missing = []
        if not probe.cuda_plugin:
            missing.append(
                "no PJRT CUDA plugin is installed (torch_xla 2.9 has no built-in XLA:CUDA; "
                f"the `harness-cuda` extra has it: {install_command('harness-cuda')})"
            )
        if not hardware.gpu:
            missing.append("no NVIDIA GPU is visible (no /dev/nvidia0, nvidia-smi lists none)")
        if missing:
            raise HarnessEnvironmentError("--device cuda: " + "; ".join(missing))
        return _cuda(probe)
    if requested == "auto":
        if probe.libtpu and hardware.tpu_chips:
            return Device("TPU", {"PJRT_DEVICE": "TPU"})
        if probe.cuda_plugin and hardware.gpu:
            return _cuda(probe)
        return _cpu()
    raise HarnessEnvironmentError(f"--device must be auto, cpu, tpu or cuda, not {requested!r}")


def _cpu() -> Device:
    # One CPU device: one process under torch_xla.launch/xmp.spawn, and the
    # compile/execution counts are those of a single replica.
    return Device("CPU", {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"})


def native_cuda() -> Device:
    """Plain PyTorch on the GPU: none of XLA's settings (the script picks ``cuda``)."""
    return Device("CUDA", {})


def _cuda(probe: Probe) -> Device:
    env = {"PJRT_DEVICE": "CUDA", "GPU_NUM_DEVICES": "1"}
    if "cuda" not in probe.xla_plugins and probe.cuda_pjrt_library:
        # torch_xla registers only `torch_xla.plugins` entry points; the bootstrap
        # registers this library as the CUDA plugin before the script runs.
        env[CUDA_LIBRARY_ENV] = probe.cuda_pjrt_library
    return Device("CUDA", env)
