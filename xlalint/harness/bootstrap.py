"""The part of the harness that runs inside the child Python processes.

This file must only use the standard library: it is copied into a fresh temporary
folder for every run and imported from there (the child interpreter may not have
xlalint installed at all). It is never written into the user's script.

What runs in the user's processes is split by what it watches, each module copied into
the hook folder next to this one (``CHILD_MODULES``) and as stdlib-only as this one:

- ``child_fixed_files``: the user's files the fix changed run from their fixed copies, in
  place of the user's files and under their names, in every process;
- ``child_steps``: optimizer steps, their times, the live counters, the stop after ``--steps``;
- ``child_transfers``: shapes of the tensors moved to the XLA device, by site;
- ``child_cuda``: a bare PJRT CUDA plugin registered as the CUDA device;
- ``runtime_watch``: XLA501/XLA502 at run time and the user's loss;
- ``child_common``: what they share (the output folder, frames of the user's code).

This module wires them in and writes each process's metrics.

Two entry points:

- ``activate()`` is called by the generated ``sitecustomize.py`` in the hook folder,
  which the harness puts first on ``PYTHONPATH``. Python imports it at start-up in
  the script's process *and* in every Python process the script starts
  (``torch_xla.launch``/``xmp.spawn`` workers, ``subprocess`` calls), so each of
  them gets its own torch_xla debug file and writes its own metrics file at exit
  (``os._exit`` included, which skips the exit handlers; and a process that imported
  torch_xla leaves a record at once, so one killed before its exit is not taken for a
  process that never used XLA).
  The harness sums the metrics files.
- ``run_main()`` runs the user's script as ``__main__`` (as ``python script.py``
  would), started by ``python -c "import _xlalint_bootstrap as b; b.run_main()" ARGS``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.machinery
import importlib.util
import json
import os
import runpy
import sys
import traceback

try:  # in the child, from the hook folder; in xlalint (tests, the runner), from the package
    import _xlalint_child_common as common
    import _xlalint_cuda as cuda
    import _xlalint_fixed_files as fixed_files
    import _xlalint_steps as steps
    import _xlalint_transfers as transfers
except ImportError:
    from xlalint.harness import child_common as common
    from xlalint.harness import child_cuda as cuda
    from xlalint.harness import child_fixed_files as fixed_files
    from xlalint.harness import child_steps as steps
    from xlalint.harness import child_transfers as transfers

#: The child modules this one imports: (name in the hook folder, the module), for the
#: runner to copy next to it.
CHILD_MODULES = (
    ("_xlalint_child_common", common),
    ("_xlalint_cuda", cuda),
    ("_xlalint_fixed_files", fixed_files),
    ("_xlalint_steps", steps),
    ("_xlalint_transfers", transfers),
)

# What the runner and the tests read here; each is defined in the module that uses it.
OUT_DIR_ENV = common.OUT_DIR_ENV
FIXED_FILES_ENV = fixed_files.FIXED_FILES_ENV
CUDA_LIBRARY_ENV = cuda.CUDA_LIBRARY_ENV
TRANSFERS_PREFIX = transfers.TRANSFERS_PREFIX
MAX_SHAPE_RUNS = transfers.MAX_SHAPE_RUNS
MAX_SLOTS_PER_SITE = transfers.MAX_SLOTS_PER_SITE
TransferLog = transfers.TransferLog
STEPS_PREFIX = steps.STEPS_PREFIX
WARMUP_STEPS = steps.WARMUP_STEPS
LIVE_PREFIX = steps.LIVE_PREFIX
LIVE_INTERVAL_S = steps.LIVE_INTERVAL_S
MAX_STEPS_ENV = steps.MAX_STEPS_ENV
TIMELINE_STEPS = steps.TIMELINE_STEPS
StepLog = steps.StepLog
register_cuda_plugin = cuda.register_cuda_plugin

#: The user's script to run, and the folder put first on ``sys.path`` (the script's
#: folder, as ``python script.py`` does: its local modules are imported from there).
SCRIPT_ENV = "XLALINT_HARNESS_SCRIPT"
SCRIPT_DIR_ENV = "XLALINT_HARNESS_SCRIPT_DIR"
#: The seed of torch's and Python's random numbers, set when torch is imported.
SEED_ENV = "XLALINT_HARNESS_SEED"
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
    # os._exit skips the exit handlers: ours run first (see ``_exit``).
    common.ACTIVE_PID = os.getpid()
    os._exit = _exit
    # Hooks on optimizer steps and host-to-device transfers go in when torch,
    # torch_xla and its loader are imported, so a process that never uses them pays nothing.
    sys.meta_path.insert(
        0,
        _AfterImport(
            {
                "torch": _on_torch,
                "torch_xla": _on_torch_xla,
                transfers.LOADER_MODULE: transfers.hook_device_loader,
            }
        ),
    )
    fixed_files.install()
    library = os.environ.get(CUDA_LIBRARY_ENV)
    if library:
        register_cuda_plugin(library)


_original_os_exit = os._exit
_before_exit = []  # what runs before the metrics are written (torch_xla's part, once imported)


def _exit(status):
    """``os._exit``, after the exit work of this module's ``atexit`` handlers: a script
    that ends with ``os._exit(0)`` after real XLA work has its metrics. Only in the
    process the hook was activated in: a fork child (multiprocessing's workers end
    with ``os._exit``) holds its parent's counters, and a device it cannot use."""
    if os.getpid() == common.ACTIVE_PID and os.environ.get(OUT_DIR_ENV):
        with contextlib.suppress(BaseException):  # never keep a process from exiting
            for work in _before_exit:
                work()
            _write_metrics(os.environ[OUT_DIR_ENV])
    _original_os_exit(status)


_exit.__doc__ = _original_os_exit.__doc__


def _write_metrics(out_dir: str) -> None:
    pid = os.getpid()
    if "torch" in sys.modules:
        with contextlib.suppress(Exception):
            common.runtime_watch().WATCH.write(out_dir)
    if steps.STEPS.count:
        with contextlib.suppress(Exception):  # never break the script's exit
            common.write_json(os.path.join(out_dir, f"{STEPS_PREFIX}{pid}.json"), steps.STEPS.to_json())
    if "torch_xla" not in sys.modules:
        return  # this process never used XLA (a resource tracker, a tokenizer worker...)
    try:
        record = {"pid": pid, **(_METRICS_AT_EXIT or _read_metrics())}
    except Exception as error:  # report it; never break the script's exit
        record = {"pid": pid, "error": f"{type(error).__name__}: {error}"}
    common.write_json(os.path.join(out_dir, f"metrics-{pid}.json"), record)
    if transfers.TRANSFERS.sites:
        common.write_json(os.path.join(out_dir, f"{TRANSFERS_PREFIX}{pid}.json"), transfers.TRANSFERS.to_json())


_METRICS_AT_EXIT: dict | None = None


def _before_torch_xla_exit() -> None:
    """Runs before torch_xla's own exit handler (registered after it): take the metrics
    as the script left them, then read the kept losses (a transfer of their own)."""
    global _METRICS_AT_EXIT
    try:
        # The last step's executions may still run: wait, as torch_xla's handler would.
        sys.modules["torch_xla"]._XLAC._xla_wait_device_ops(devices=[])
        _METRICS_AT_EXIT = _read_metrics()
        common.runtime_watch().WATCH.read_losses(sys.modules["torch_xla"]._XLAC)
        common.runtime_watch().WATCH.read_step_losses(sys.modules["torch_xla"]._XLAC)
    except Exception:
        pass


class _AfterImport:
    """A meta path finder that runs a function right after a module is imported."""

    def __init__(self, hooks: dict) -> None:
        self._hooks = dict(hooks)

    def find_spec(self, name, path=None, target=None):
        hook = self._hooks.get(name)
        if hook is None:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # The hook stays until the module is executed: a `find_spec` alone (transformers
        # asks whether torch_xla is installed before importing it) imports nothing.
        loader = spec.loader
        run_module = loader.exec_module

        def exec_module(module):
            run_module(module)
            if self._hooks.pop(name, None) is not None:
                with contextlib.suppress(Exception):  # a hook must never break the script
                    hook(module)

        loader.exec_module = exec_module
        return spec


def _on_torch(torch_module) -> None:
    """Right after torch is imported: the seed ``--compare`` gives every run (so the
    reference, the port and the fixed copy draw the same data and the same initial
    weights, as far as the script does not seed them itself), then the step hooks."""
    seed = os.environ.get(SEED_ENV)
    if seed is not None:
        with contextlib.suppress(Exception):
            import random

            random.seed(int(seed))
            torch_module.manual_seed(int(seed))
    steps.hook_optimizer_steps(torch_module)


def _on_torch_xla(torch_xla_module) -> None:
    """Right after torch_xla is imported: record transfers, take the metrics before its
    own exit handler, and leave a record at once (a process killed before its exit
    handlers ran still imported it)."""
    transfers.hook_tensor_to(torch_xla_module)
    # After torch_xla's own exit handler was registered: runs before it.
    atexit.register(_before_torch_xla_exit)
    _before_exit.append(_before_torch_xla_exit)
    out_dir = os.environ.get(OUT_DIR_ENV)
    if out_dir:
        with contextlib.suppress(Exception):
            common.write_json(
                os.path.join(out_dir, f"metrics-{os.getpid()}.json"), {"pid": os.getpid(), "unfinished": True}
            )


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
        # Tensors created on the XLA device: 0 means the script never used it.
        "xla_tensors": counter("CreateXlaTensor"),
        # The counter of a fallback op is named after it (e.g. "aten::nonzero").
        "fallback_ops": {name: counter(name) for name in fallback_ops},
    }


def run_main() -> None:
    script = os.environ.pop(SCRIPT_ENV)
    sys.argv = [script, *sys.argv[1:]]
    # `python -c` put the current folder first; `python script.py` puts the script's.
    sys.path[0] = os.environ.pop(SCRIPT_DIR_ENV, os.path.dirname(script))
    try:
        fixed_path = fixed_files.fixed_copy_of(script)
        if fixed_path is None:
            runpy.run_path(script, run_name="__main__")
        else:
            # The fixed code runs as the user's script: __file__ and sys.argv[0] are
            # the user's, so paths relative to the script still find its files.
            fixed_files.run_code_as_file(fixed_files.compile_fixed(fixed_path), script, "__main__")
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
