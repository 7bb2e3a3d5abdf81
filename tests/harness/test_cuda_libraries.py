"""XLA:CUDA with PyPI's plugin: the child's private library folder and its one-line errors.

The folder and the errors are tested here on any machine, with a fake plugin layout.
The runs on a GPU are at the end, skipped without an NVIDIA GPU and the plugin.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from xlalint.harness import cuda_libraries
from xlalint.harness.cuda_libraries import (
    LIBRARY_PATH_ENV,
    build_library_folder,
    check_plugin_loads,
    child_library_path,
    load_error_message,
    prepare_device,
)
from xlalint.harness.environment import CUDA_LIBRARY_ENV, Device, HarnessEnvironmentError
from xlalint.install_hint import install_command


def _layout(tmp_path: Path) -> tuple[str, Path, Path]:
    """site-packages with the plugin and torch's nvrtc 12.8; a --target folder with 12.9."""
    site = tmp_path / "site-packages"
    plugin = site / "xla_plugins" / "xla_cuda12_pjrt" / "xla_gpu_pjrt.so"
    plugin.parent.mkdir(parents=True)
    plugin.write_bytes(b"not an ELF file, and long enough to be read as one" * 40)
    torch_nvrtc = site / "nvidia" / "cuda_nvrtc" / "lib"
    torch_nvrtc.mkdir(parents=True)
    (torch_nvrtc / "libnvrtc-builtins.so.12.8").write_bytes(b"12.8")
    target = tmp_path / "cuda-12.9"
    extra = target / "nvidia" / "cuda_nvrtc" / "lib"
    extra.mkdir(parents=True)
    for name in ("libnvrtc-builtins.so.12.9", "libnvrtc-builtins.so.12.8", "libnvrtc.so.12"):
        (extra / name).write_bytes(name.encode())
    driver = tmp_path / "driver" / "libcuda.so.1"
    driver.parent.mkdir()
    driver.write_bytes(b"driver")
    return str(plugin), target, driver


def test_the_folder_links_only_what_torchs_libraries_lack(tmp_path, monkeypatch):
    plugin, target, driver = _layout(tmp_path)
    monkeypatch.setattr(cuda_libraries, "_system_has", lambda name: False)
    folder = tmp_path / "cuda-libs"
    linked = build_library_folder(folder, plugin, {LIBRARY_PATH_ENV: str(target)}, driver_library=str(driver))
    # Not libnvrtc.so.12 (torch's 12.8 one is loaded first and must stay the only one),
    # not the 12.8 builtins torch already has.
    assert linked == ["libcuda.so", "libnvrtc-builtins.so.12.9"]
    assert sorted(p.name for p in folder.iterdir()) == linked
    assert (folder / "libnvrtc-builtins.so.12.9").read_bytes() == b"libnvrtc-builtins.so.12.9"
    assert (folder / "libcuda.so").resolve() == driver.resolve()
    # Built again for the next run: the same links.
    assert build_library_folder(folder, plugin, {LIBRARY_PATH_ENV: str(target)}, driver_library=str(driver)) == linked


def test_libcuda_so_is_not_linked_when_the_system_has_it(tmp_path, monkeypatch):
    plugin, target, driver = _layout(tmp_path)
    monkeypatch.setattr(cuda_libraries, "_system_has", lambda name: name == "libcuda.so")
    linked = build_library_folder(tmp_path / "f", plugin, {LIBRARY_PATH_ENV: str(target)}, driver_library=str(driver))
    assert linked == ["libnvrtc-builtins.so.12.9"]


def test_the_default_target_folder_is_searched(tmp_path, monkeypatch):
    plugin, target, driver = _layout(tmp_path)
    monkeypatch.setattr(cuda_libraries, "DEFAULT_TARGET", target)
    monkeypatch.setattr(cuda_libraries, "_system_has", lambda name: True)
    assert build_library_folder(tmp_path / "f", plugin, {}, driver_library=str(driver)) == ["libnvrtc-builtins.so.12.9"]


def test_the_private_folder_goes_first_on_the_childs_library_path(tmp_path):
    folder = tmp_path / "cuda-libs"
    assert child_library_path(folder, {}) == str(folder)
    assert child_library_path(folder, {"LD_LIBRARY_PATH": "/opt/lib:/usr/lib"}) == f"{folder}:/opt/lib:/usr/lib"


@pytest.mark.parametrize(
    ("loader_says", "expected"),
    [
        (
            "OSError: libnvrtc-builtins.so.12.9: cannot open shared object file: No such file or directory",
            "needs libnvrtc-builtins.so.12.9, which is not found (torch 2.9.0 brings CUDA 12.8's): "
            "pip install --no-deps --target ~/.cache/xlalint/cuda-12.9 nvidia-cuda-nvrtc-cu12==12.9.86",
        ),
        (
            "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
            "needs libcuda.so.1, which is not found: it comes with the NVIDIA driver",
        ),
        (
            "OSError: libcudnn_ops.so.9: cannot open shared object file: No such file or directory",
            f"needs libcudnn_ops.so.9, which is not found: install the CUDA 12 library that provides it, "
            f"or add its folder to {LIBRARY_PATH_ENV}",
        ),
        ("OSError: x.so: invalid ELF header", "the PJRT CUDA plugin does not load: OSError: x.so: invalid ELF header"),
    ],
)
def test_a_plugin_that_does_not_load_says_what_to_install(loader_says, expected):
    message = load_error_message(loader_says)
    assert message.startswith("--device cuda: ")
    assert expected in message
    assert "\n" not in message


def test_the_load_check_runs_in_the_childs_interpreter(tmp_path, monkeypatch):
    plugin, target, _driver = _layout(tmp_path)
    with pytest.raises(HarnessEnvironmentError, match=r"plugin does not load: OSError: .*invalid ELF header"):
        check_plugin_loads(sys.executable, plugin, dict(os.environ))
    device = Device("CUDA", {"PJRT_DEVICE": "CUDA", CUDA_LIBRARY_ENV: plugin})
    with pytest.raises(HarnessEnvironmentError, match="invalid ELF header"):
        prepare_device(device, sys.executable, tmp_path / "work", {LIBRARY_PATH_ENV: str(target)})
    assert (tmp_path / "work" / "cuda-libs" / "libnvrtc-builtins.so.12.9").exists()


def test_devices_without_a_bare_plugin_are_unchanged(tmp_path):
    cpu = Device("CPU", {"PJRT_DEVICE": "CPU"})
    assert prepare_device(cpu, sys.executable, tmp_path) is cpu
    assert not (tmp_path / "cuda-libs").exists()


# -- on a GPU -------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
needs_gpu = pytest.mark.skipif(
    not (os.path.exists("/dev/nvidia0") and importlib.util.find_spec("xla_plugins.xla_cuda12_pjrt")),
    reason=f"needs an NVIDIA GPU and xla-cuda12-pjrt ({install_command('harness-cuda')})",
)


@needs_gpu
def test_dynamic_padding_runs_on_xla_cuda(xlalint_command, tmp_path):
    report = tmp_path / "report.json"
    done = xlalint_command(
        "run",
        str(REPO / "examples" / "dynamic_padding.py"),
        "--device",
        "cuda",
        "--unsafe-fixes",
        "--json",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    assert "CUDA, torch_xla" in done.stdout
    assert "warning: no XLA computation ran" not in done.stdout
