"""Environment checks: torch/torch_xla present and matching, device choice."""

from __future__ import annotations

import sys

import pytest

from xlalint.harness.environment import (
    INSTALL_HINT,
    Hardware,
    HarnessEnvironmentError,
    Probe,
    check_torch_xla,
    choose_device,
    probe_interpreter,
)


def _probe(**changes) -> Probe:
    values = dict(
        python="3.11.7",
        torch=True,
        torch_xla=True,
        torch_version="2.9.0+cpu",
        torch_xla_version="2.9.0",
        libtpu=False,
        xla_plugins=[],
        cuda_plugin_module=False,
    )
    values.update(changes)
    return Probe(**values)


NO_HARDWARE = Hardware(tpu_chips=0, gpu=False)


def test_matching_versions_pass():
    assert check_torch_xla(_probe()) == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"torch": False, "torch_version": None}, "torch is not installed"),
        ({"torch_xla": False, "torch_xla_version": None}, "torch_xla is not installed"),
        ({"torch_xla_version": "2.8.0"}, "torch 2.9.0+cpu does not match torch_xla 2.8.0"),
    ],
)
def test_missing_or_mismatched_says_what_to_install(changes, message):
    with pytest.raises(HarnessEnvironmentError) as raised:
        check_torch_xla(_probe(**changes))
    assert message in str(raised.value)
    assert INSTALL_HINT in str(raised.value)
    assert "\n" not in str(raised.value)


def test_an_untested_matching_pair_only_warns():
    (warning,) = check_torch_xla(_probe(torch_version="2.8.0", torch_xla_version="2.8.0"))
    assert "not the tested 2.9" in warning


def test_cpu_device_uses_one_cpu_device():
    device = choose_device("cpu", _probe(), NO_HARDWARE)
    assert device.name == "CPU"
    assert device.env == {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"}


def test_auto_picks_cpu_without_accelerators_and_tpu_or_cuda_when_present():
    assert choose_device("auto", _probe(), NO_HARDWARE).name == "CPU"
    assert choose_device("auto", _probe(libtpu=True), Hardware(4, False)).name == "TPU"
    # libtpu without chips (a CPU VM with torch_xla[tpu] installed) is still CPU.
    assert choose_device("auto", _probe(libtpu=True), NO_HARDWARE).name == "CPU"
    assert choose_device("auto", _probe(xla_plugins=["cuda"]), Hardware(0, True)).name == "CUDA"
    assert choose_device("auto", _probe(xla_plugins=["cuda"]), NO_HARDWARE).name == "CPU"


def test_cuda_says_what_is_missing():
    with pytest.raises(HarnessEnvironmentError) as raised:
        choose_device("cuda", _probe(), NO_HARDWARE)
    message = str(raised.value)
    assert "no PJRT CUDA plugin" in message and "no NVIDIA GPU" in message
    with pytest.raises(HarnessEnvironmentError) as raised:
        choose_device("cuda", _probe(xla_plugins=["cuda"]), NO_HARDWARE)
    assert "plugin" not in str(raised.value) and "no NVIDIA GPU" in str(raised.value)
    device = choose_device("cuda", _probe(cuda_plugin_module=True), Hardware(0, True))
    assert device.env["PJRT_DEVICE"] == "CUDA"


def test_tpu_says_what_is_missing():
    with pytest.raises(HarnessEnvironmentError, match="libtpu is not installed"):
        choose_device("tpu", _probe(), NO_HARDWARE)
    with pytest.raises(HarnessEnvironmentError, match="no TPU chips"):
        choose_device("tpu", _probe(libtpu=True), NO_HARDWARE)
    assert choose_device("tpu", _probe(libtpu=True), Hardware(1, False)).env == {"PJRT_DEVICE": "TPU"}


def test_probe_reads_this_interpreter(torch_xla_required):
    probe = probe_interpreter(sys.executable)
    assert probe.torch and probe.torch_xla
    assert probe.torch_xla_version.startswith("2.")
    assert check_torch_xla(probe) == []


def _fake_bare_cuda_plugin(site) -> str:
    """A package laid out as PyPI's xla-cuda12-pjrt: an `xla_plugins` entry point
    naming a module folder that holds the PJRT library."""
    folder = site / "xla_plugins" / "xla_cuda12_pjrt"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "xla_gpu_pjrt.so").write_bytes(b"not really a library")
    info = site / "xla_cuda12_pjrt-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xla_cuda12_pjrt\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("[xla_plugins]\nxla_cuda12_pjrt = xla_plugins.xla_cuda12_pjrt\n")
    return str(folder / "xla_gpu_pjrt.so")


def test_probe_finds_a_bare_pjrt_cuda_plugin(tmp_path):
    import os

    library = _fake_bare_cuda_plugin(tmp_path)
    probe = probe_interpreter(sys.executable, {**os.environ, "PYTHONPATH": str(tmp_path)})
    assert probe.cuda_pjrt_library == library and probe.cuda_plugin
    # Without a GPU it says so; with one, the child is told to register the library.
    with pytest.raises(HarnessEnvironmentError, match="no NVIDIA GPU is visible") as raised:
        choose_device("cuda", probe, NO_HARDWARE)
    assert "plugin" not in str(raised.value)
    device = choose_device("cuda", probe, Hardware(0, True))
    assert device.env["PJRT_DEVICE"] == "CUDA"
    assert device.env["XLALINT_CUDA_PJRT_LIBRARY"] == library


def test_bootstrap_registers_a_bare_cuda_plugin_with_torch_xla(tmp_path, torch_xla_required):
    """Without a GPU this goes as far as torch_xla loading the registered library."""
    import os
    import subprocess
    from pathlib import Path

    import xlalint.harness.bootstrap as bootstrap

    library = tmp_path / "xla_gpu_pjrt.so"
    code = (
        f"import sys; sys.path.insert(0, {str(Path(bootstrap.__file__).parent)!r})\n"
        "import bootstrap\n"
        f"bootstrap.register_cuda_plugin({str(library)!r})\n"
        "import torch_xla\n"
        "torch_xla.device()\n"
    )
    env = {**os.environ, "PJRT_DEVICE": "CUDA"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert f"Failed to open {library}" in done.stderr
