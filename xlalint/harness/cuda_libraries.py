"""The libraries PyPI's PJRT CUDA plugin needs that torch's CUDA does not bring.

``xla-cuda12-pjrt`` 0.0.1 (the only release) is built against CUDA 12.9; torch 2.9.0
pins CUDA 12.8 wheels (``nvidia-*-cu12==12.8.*``). Inside one process the plugin
shares torch's already-loaded CUDA libraries of the same soname (``libcublas.so.12``,
``libnvrtc.so.12``, ``libcudnn*.so.9``...): those are found through the plugin's
RUNPATH in ``site-packages/nvidia``. What it cannot share is a soname torch's set
lacks: ``libnvrtc-builtins.so.12.9`` (checked by loading the plugin: it is the first
library that fails). And it links ``libcuda.so`` without a version, which a driver
install does not always provide (only ``libcuda.so.1``).

So each CUDA run gets a private folder on the *child's* ``LD_LIBRARY_PATH`` holding
links to exactly those files: the plugin's extra ``libnvrtc-builtins`` (from
``nvidia-cuda-nvrtc-cu12==12.9.*`` installed with ``pip install --target`` into its own
folder, so pip keeps torch's 12.8 pin), and ``libcuda.so`` pointing at the driver's
``libcuda.so.1`` when needed. Nothing torch loads is shadowed: every link has a
soname torch's libraries do not have.

Before the run, a probe loads the plugin (``ctypes.CDLL``) in the child's
interpreter with that library path; a library still missing becomes a one-line error
saying how to get it.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

from xlalint.harness.environment import (
    CUDA_LIBRARY_ENV,
    Device,
    HarnessEnvironmentError,
    last_error_line,
    run_probe,
)

#: Folders (``:``-separated) that hold the CUDA libraries the plugin needs beyond
#: torch's, e.g. the ``--target`` of ``pip install`` below.
LIBRARY_PATH_ENV = "XLALINT_CUDA_LIBRARY_PATH"
DEFAULT_TARGET = Path("~/.cache/xlalint/cuda-12.9")
NVRTC_VERSION = "12.9.86"  # the newest 12.9 release (PyPI); the plugin needs 12.9
_BUILTINS = "libnvrtc-builtins.so."
_MISSING = re.compile(r"(?P<name>lib[\w.+-]+\.so[\w.]*): cannot open shared object file")
# Where torch's CUDA 12.8 wheels put nvrtc, relative to site-packages.
_TORCH_NVRTC = Path("nvidia") / "cuda_nvrtc" / "lib"


def prepare_device(device: Device, python: str, workdir: Path, environ: dict[str, str] | None = None) -> Device:
    """For a bare PJRT CUDA plugin: the device with the child's library path set,
    after checking that the plugin loads with it. Other devices are returned as is."""
    library = device.env.get(CUDA_LIBRARY_ENV)
    if not library:
        return device
    environ = dict(os.environ if environ is None else environ)
    folder = workdir / "cuda-libs"
    build_library_folder(folder, library, environ)
    env = {**device.env, "LD_LIBRARY_PATH": child_library_path(folder, environ)}
    check_plugin_loads(python, library, {**environ, **env})
    return Device(device.name, env)


def install_hint() -> str:
    return (
        f"pip install --no-deps --target {DEFAULT_TARGET} nvidia-cuda-nvrtc-cu12=={NVRTC_VERSION} "
        f"(its own folder keeps torch's CUDA 12.8 pin; or set {LIBRARY_PATH_ENV})"
    )


def search_folders(environ: dict[str, str] | None = None) -> list[Path]:
    """Where to look for the plugin's extra libraries, in order."""
    environ = os.environ if environ is None else environ
    roots = [Path(p).expanduser() for p in environ.get(LIBRARY_PATH_ENV, "").split(os.pathsep) if p]
    roots.append(DEFAULT_TARGET.expanduser())
    folders = []
    for root in roots:
        # A `pip install --target` folder keeps the wheel's layout.
        for folder in (root / _TORCH_NVRTC, root):
            if folder not in folders:
                folders.append(folder)
    return folders


def site_packages_of(plugin_library: str) -> Path:
    """``site-packages`` of ``.../site-packages/xla_plugins/xla_cuda12_pjrt/x.so``."""
    return Path(plugin_library).resolve().parents[2]


def build_library_folder(
    folder: Path,
    plugin_library: str,
    environ: dict[str, str] | None = None,
    driver_library: str | None = None,
) -> list[str]:
    """Fill ``folder`` with links to the libraries the plugin lacks; returns their names.

    ``driver_library`` is the driver's ``libcuda.so.1`` (found on this machine when
    None); ``libcuda.so`` is linked to it when the system has no ``libcuda.so``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    torch_has = {path.name for path in (site_packages_of(plugin_library) / _TORCH_NVRTC).glob(f"{_BUILTINS}*")}
    linked: dict[str, Path] = {}
    for source in search_folders(environ):
        for found in sorted(source.glob(f"{_BUILTINS}*")):
            if found.name not in torch_has and found.name not in linked:
                linked[found.name] = found.resolve()
    if driver_library is None:
        driver_library = _driver_library()
    if driver_library and not _system_has("libcuda.so"):
        linked["libcuda.so"] = Path(driver_library).resolve()
    for name, target in linked.items():
        link = folder / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    return sorted(linked)


def child_library_path(folder: Path, environ: dict[str, str] | None = None) -> str:
    """``LD_LIBRARY_PATH`` for the child: the private folder first, then the user's."""
    environ = os.environ if environ is None else environ
    rest = environ.get("LD_LIBRARY_PATH", "")
    return os.pathsep.join([str(folder), *([rest] if rest else [])])


_LOAD_PROBE = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"


def check_plugin_loads(python: str, plugin_library: str, env: dict[str, str]) -> None:
    """Load the plugin in ``python`` with ``env``; raise a one-line error if it fails."""
    cannot = "--device cuda: cannot check the PJRT CUDA plugin"
    done = run_probe(python, _LOAD_PROBE, (plugin_library,), env, 120, cannot)
    if done.returncode != 0:
        raise HarnessEnvironmentError(load_error_message(last_error_line(done)))


def load_error_message(error_line: str) -> str:
    """The one-line error for a plugin that does not load, with what to do."""
    match = _MISSING.search(error_line)
    if not match:
        return f"--device cuda: the PJRT CUDA plugin does not load: {error_line.strip()}"
    name = match["name"]
    prefix = f"--device cuda: the PJRT CUDA plugin needs {name}, which is not found"
    if name.startswith(_BUILTINS):
        return f"{prefix} (torch 2.9.0 brings CUDA 12.8's): {install_hint()}"
    if name.startswith(("libcuda.so", "libnvidia-")):
        return f"{prefix}: it comes with the NVIDIA driver; is the driver installed?"
    return f"{prefix}: install the CUDA 12 library that provides it, or add its folder to {LIBRARY_PATH_ENV}"


def _driver_library() -> str | None:
    """The driver's ``libcuda.so.1`` on this machine, if any."""
    return _system_libraries().get("libcuda.so.1")


def _system_has(name: str) -> bool:
    return name in _system_libraries()


def _system_libraries() -> dict[str, str]:
    """soname -> path of the 64-bit libraries the dynamic linker knows (``ldconfig -p``)
    and those in ``LD_LIBRARY_PATH``."""
    found: dict[str, str] = {}
    for folder in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        for path in glob.glob(os.path.join(folder, "lib*.so*")) if folder else ():
            found.setdefault(os.path.basename(path), path)
    try:
        listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        listed = ""
    for line in listed.splitlines():
        described, _, path = line.partition("=>")
        parts = described.split()
        if parts and path.strip() and "64" in described:  # not a 32-bit "(libc6)" one
            found.setdefault(parts[0], path.strip())
    return found
