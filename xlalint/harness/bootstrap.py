"""The part of the harness that runs inside the child Python processes.

This file must only use the standard library: it is copied into a fresh temporary
folder for every run and imported from there (the child interpreter may not have
xlalint installed at all). It is never written into the user's script.

Two entry points:

- ``activate()`` is called by the generated ``sitecustomize.py`` in the hook folder,
  which the harness puts first on ``PYTHONPATH``. Python imports it at start-up in
  the script's process *and* in every Python process the script starts
  (``torch_xla.launch``/``xmp.spawn`` workers, ``subprocess`` calls), so each of
  them gets its own torch_xla debug file and writes its own metrics file at exit.
  The harness sums the metrics files.
- ``run_main()`` runs the user's script as ``__main__`` (as ``python script.py``
  would), started by ``python -c "import _xlalint_bootstrap as b; b.run_main()" ARGS``.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import sys
import traceback

#: Folder where every process writes ``metrics-<pid>.json`` and ``debug-<pid>.log``;
#: the hook does nothing when it is not set.
OUT_DIR_ENV = "XLALINT_HARNESS_OUT"
#: The script to run, and the folder put first on ``sys.path`` (the user's script's
#: folder, so that sibling imports work when a fixed copy is run from a temp folder).
SCRIPT_ENV = "XLALINT_HARNESS_SCRIPT"
SCRIPT_DIR_ENV = "XLALINT_HARNESS_SCRIPT_DIR"
#: A bare PJRT CUDA plugin library (xla-cuda12-pjrt) to register as the CUDA device.
CUDA_LIBRARY_ENV = "XLALINT_CUDA_PJRT_LIBRARY"
#: Written by ``run_main`` when importing torch or torch_xla fails in the child.
IMPORT_ERROR_FILE = "import-error.json"


def activate() -> None:
    out_dir = os.environ.get(OUT_DIR_ENV)
    if not out_dir:
        return
    # One debug file per process: torch_xla reads PT_XLA_DEBUG_FILE when it is
    # imported, which is after this runs.
    os.environ["PT_XLA_DEBUG_FILE"] = os.path.join(out_dir, f"debug-{os.getpid()}.log")
    # Registered before torch_xla is imported, so it runs after torch_xla's own exit
    # handler; the metrics are plain counters and can still be read then.
    atexit.register(_write_metrics, out_dir)
    library = os.environ.get(CUDA_LIBRARY_ENV)
    if library:
        register_cuda_plugin(library)


def register_cuda_plugin(library: str) -> None:
    """Make ``PJRT_DEVICE=CUDA`` load ``library``, a bare PJRT CUDA plugin.

    torch_xla 2.9 has no built-in XLA:CUDA and registers only plugins that declare a
    ``torch_xla.plugins`` entry point; xla-cuda12-pjrt ships just the PJRT library,
    so it is wrapped in a ``DevicePlugin`` here, in every process (spawned workers
    do not inherit the parent's registry). The options follow torch_xla's own CUDA
    plugin: one process per GPU, ranks from the launcher's environment.
    """
    from torch_xla.experimental import plugins

    def number(name: str, default: int) -> int:
        return int(os.environ.get(name, default))

    class BareCudaPlugin(plugins.DevicePlugin):
        def library_path(self) -> str:
            return library

        def physical_chip_count(self) -> int:
            return number("GPU_NUM_DEVICES", 1)

        def client_create_options(self) -> dict:
            local_rank = number("LOCAL_RANK", 0)
            local_world = number("LOCAL_WORLD_SIZE", 1)
            return {
                "platform_name": "gpu",
                "allocator": "default",
                "visible_devices": [local_rank],
                "node_id": number("RANK", local_rank),
                "num_nodes": number("WORLD_SIZE", local_world),
            }

        def requires_xla_coordinator(self) -> bool:
            return True

    plugins.use_dynamic_plugins()
    plugins.register_plugin("CUDA", BareCudaPlugin())


def _write_metrics(out_dir: str) -> None:
    if "torch_xla" not in sys.modules:
        return  # this process never used XLA (a resource tracker, a tokenizer worker...)
    pid = os.getpid()
    try:
        record = {"pid": pid, **_read_metrics()}
    except Exception as error:  # report it; never break the script's exit
        record = {"pid": pid, "error": f"{type(error).__name__}: {error}"}
    path = os.path.join(out_dir, f"metrics-{pid}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(path + ".tmp", path)


def _read_metrics() -> dict:
    import torch_xla.debug.metrics as met

    def counter(name: str) -> int:
        return int(met.counter_value(name) or 0)

    def samples(name: str) -> int:
        data = met.metric_data(name)  # (total samples, accumulator, recent samples) or None
        return int(data[0]) if data else 0

    def total_seconds(name: str) -> float:
        data = met.metric_data(name)  # a time metric accumulates nanoseconds
        return float(data[1]) / 1e9 if data else 0.0

    fallback_ops = sorted(met.executed_fallback_ops())
    return {
        "compiles": counter("UncachedCompile"),
        "cached_compiles": counter("CachedCompile"),
        "executions": samples("ExecuteTime"),
        "syncs": counter("MarkStep"),
        "host_transfers": samples("TransferFromDeviceTime"),
        "compile_time_s": total_seconds("CompileTime"),
        # The counter of a fallback op is named after it (e.g. "aten::nonzero").
        "fallback_ops": {name: counter(name) for name in fallback_ops},
    }


def run_main() -> None:
    script = os.environ.pop(SCRIPT_ENV)
    sys.argv = [script, *sys.argv[1:]]
    # `python -c` put the current folder first; `python script.py` puts the script's.
    sys.path[0] = os.environ.pop(SCRIPT_DIR_ENV, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as error:
        if isinstance(error, ImportError) and _is_torch_import_error(error):
            _record_import_error(error)
        # Report it as `python script.py` would: without this module's and runpy's
        # frames (the default hook prints the exception's own __traceback__).
        error.with_traceback(_without_harness_frames(error.__traceback__))
        sys.excepthook(type(error), error, error.__traceback__)
        sys.exit(1)


def _without_harness_frames(tb):
    while tb is not None and (
        tb.tb_frame.f_code.co_filename in (__file__, "<string>")
        or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")
    ):
        tb = tb.tb_next
    return tb


def _is_torch_import_error(error: ImportError) -> bool:
    """True when the failing import is torch or torch_xla itself (missing or broken),
    not some other module the script imports."""
    name = error.name or ""
    if name.split(".")[0] in ("torch", "torch_xla"):
        return True
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return False
    # A broken install raises inside the package's own files
    # (e.g. "undefined symbol" from torch_xla/_XLAC when torch does not match).
    innermost = os.path.realpath(frames[-1].filename)
    return any(innermost.startswith(folder + os.sep) for folder in _package_folders())


def _package_folders() -> list[str]:
    import importlib.util

    folders = []
    for name in ("torch", "torch_xla"):
        try:
            spec = importlib.util.find_spec(name)  # a top-level spec imports nothing
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            folders.append(os.path.realpath(folder))
    return folders


def _record_import_error(error: ImportError) -> None:
    out_dir = os.environ.get(OUT_DIR_ENV)
    if not out_dir:
        return
    message = f"{type(error).__name__}: {error}".splitlines()[0]
    with open(os.path.join(out_dir, IMPORT_ERROR_FILE), "w", encoding="utf-8") as file:
        json.dump({"message": message, "name": error.name}, file)


def chain_next_sitecustomize(hook_dir: str) -> None:
    """Run the ``sitecustomize`` our hook shadows (a distribution's or a venv's), if any."""
    import importlib.machinery
    import importlib.util

    hook_dir = os.path.realpath(hook_dir)
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != hook_dir]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as error:  # site.py also only warns
        print(f"Error in sitecustomize {spec.origin}: {error!r}", file=sys.stderr)
