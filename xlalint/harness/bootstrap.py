"""The part of the harness that runs inside the child Python processes.

This file must only use the standard library: it is copied into a fresh temporary
folder for every run and imported from there (the child interpreter may not have
xlalint installed at all). It is never written into the user's script.

The user's files the fix changed run from their fixed copies, in place of the user's
files and under their names (see ``FixedSourceFinder``), in every process.

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
import re
import runpy
import sys
import time
import traceback
import types

#: Folder where every process writes ``metrics-<pid>.json`` and ``debug-<pid>.log``;
#: the hook does nothing when it is not set.
OUT_DIR_ENV = "XLALINT_HARNESS_OUT"
#: The user's script to run, and the folder put first on ``sys.path`` (the script's
#: folder, as ``python script.py`` does: its local modules are imported from there).
SCRIPT_ENV = "XLALINT_HARNESS_SCRIPT"
SCRIPT_DIR_ENV = "XLALINT_HARNESS_SCRIPT_DIR"
#: A JSON file {the user's file (real path): its fixed copy}: the files whose fixed
#: copy runs in their place.
FIXED_FILES_ENV = "XLALINT_HARNESS_FIXED_FILES"
#: A bare PJRT CUDA plugin library (xla-cuda12-pjrt) to register as the CUDA device.
CUDA_LIBRARY_ENV = "XLALINT_CUDA_PJRT_LIBRARY"
#: Written by ``run_main`` when importing torch or torch_xla fails in the child.
IMPORT_ERROR_FILE = "import-error.json"
#: Shapes of the tensors each process moved to the XLA device, by site in the user's
#: code: ``transfers-<pid>.json`` (see ``TransferLog``).
TRANSFERS_PREFIX = "transfers-"
#: Optimizer steps and their timing, and peak device memory: ``steps-<pid>.json``.
STEPS_PREFIX = "steps-"
#: Steps not timed: the first ones compile (XLA) or warm up caches and allocators.
WARMUP_STEPS = 3
#: Counters so far, for the parent's progress line: ``live-<pid>.json``, rewritten at
#: an optimizer step at most this often (see ``StepLog.on_step``).
LIVE_PREFIX = "live-"
LIVE_INTERVAL_S = 0.5
LIVE_EVERY_STEP_UNTIL = 10
#: Stop the run after this many optimizer steps (``xlalint run --steps N``): the step
#: hook raises ``StepLimitReached`` (a ``SystemExit(0)``), so the script's process
#: ends through its exit handlers and writes its metrics as at a normal end.
MAX_STEPS_ENV = "XLALINT_HARNESS_MAX_STEPS"
#: Steps whose time and compile count are kept for the report's per-step chart (the
#: first ones: where compilations happen); memory stays bounded on long runs.
TIMELINE_STEPS = 1000


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
    global _ACTIVE_PID
    _ACTIVE_PID = os.getpid()
    os._exit = _exit
    # Hooks on host-to-device transfers go in when torch_xla (and its loader) is
    # imported, so a process that never uses XLA pays nothing.
    sys.meta_path.insert(
        0,
        _AfterImport(
            {"torch": _hook_optimizer_steps, "torch_xla": _hook_tensor_to, _LOADER_MODULE: _hook_device_loader}
        ),
    )
    fixed_files = _read_fixed_files()
    if fixed_files:
        # Just before the path finder: built-in and frozen modules still win over a
        # user's file of the same name, as they do without the harness.
        finders = sys.meta_path
        at = (
            finders.index(importlib.machinery.PathFinder) if importlib.machinery.PathFinder in finders else len(finders)
        )
        finders.insert(at, FixedSourceFinder(fixed_files))
        # multiprocessing's spawn runs the main script again in each worker, by path.
        runpy.run_path = _run_path_fixed
    library = os.environ.get(CUDA_LIBRARY_ENV)
    if library:
        register_cuda_plugin(library)


# -- the fixed copies run as the user's files ------------------------------------------

_FIXED_FILES: dict[str, str] | None = None
_original_run_path = runpy.run_path


def _read_fixed_files() -> dict[str, str]:
    global _FIXED_FILES
    if _FIXED_FILES is None:
        path = os.environ.get(FIXED_FILES_ENV)
        try:
            with open(path, encoding="utf-8") as file:
                _FIXED_FILES = {str(user): str(fixed) for user, fixed in json.load(file).items()}
        except (TypeError, OSError, ValueError, AttributeError):
            _FIXED_FILES = {}
    return _FIXED_FILES


def _fixed_copy_of(path: str) -> str | None:
    return _read_fixed_files().get(os.path.realpath(path))


def _compile_fixed(fixed_path: str):
    # Compiled under the copy's name: frames, debug causes and tracebacks show the
    # code that ran (the harness maps its lines back to the user's file).
    with open(fixed_path, "rb") as file:
        return compile(file.read(), fixed_path, "exec", dont_inherit=True)


class FixedSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads the user's module with its fixed copy's code. Everything else stays the
    user's: ``__file__``, a package's ``__path__`` (its submodules, its data files),
    ``importlib.resources``. Nothing is cached in the user's ``__pycache__``."""

    def __init__(self, fullname: str, path: str, fixed_path: str) -> None:
        super().__init__(fullname, path)
        self.fixed_path = fixed_path

    def get_code(self, fullname):
        return _compile_fixed(self.fixed_path)

    def get_source(self, fullname):
        with open(self.fixed_path, "rb") as file:
            return importlib.util.decode_source(file.read())


class FixedSourceFinder:
    """A meta path finder: a module Python would load from one of the user's files
    that the fix changed gets its fixed copy's code (``FixedSourceLoader``).

    The user's file is found as Python would find it (the path finder, with the
    script's folder first on ``sys.path``), so a module is fixed under any name it
    is imported by. Only names whose last part is a fixed file's are looked up.
    """

    def __init__(self, fixed_files: dict[str, str]) -> None:
        self._fixed_files = fixed_files
        self._stems = {_module_stem(path) for path in fixed_files}

    def find_spec(self, name, path=None, target=None):
        if name.rpartition(".")[2] not in self._stems:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.has_location or not spec.origin:
            return None
        fixed_path = self._fixed_files.get(os.path.realpath(spec.origin))
        if fixed_path is None:
            return None
        spec.loader = FixedSourceLoader(name, spec.origin, fixed_path)
        return spec

    def invalidate_caches(self) -> None:
        pass


def _module_stem(path: str) -> str:
    """The last part of the name a file is imported under: a package's folder name."""
    folder, filename = os.path.split(path)
    stem = os.path.splitext(filename)[0]
    return os.path.basename(folder) if stem == "__init__" else stem


def _run_path_fixed(path_name, init_globals=None, run_name=None):
    """``runpy.run_path``, running a fixed copy's code in place of the user's file."""
    fixed_path = _fixed_copy_of(os.fspath(path_name)) if isinstance(path_name, (str, os.PathLike)) else None
    if fixed_path is None:
        return _original_run_path(path_name, init_globals, run_name)
    return _run_code_as_file(_compile_fixed(fixed_path), os.fspath(path_name), run_name or "<run_path>", init_globals)


def _run_code_as_file(code, path: str, run_name: str, init_globals=None) -> dict:
    """Run ``code`` as ``runpy.run_path(path, run_name=run_name)`` runs the file: a
    fresh module in ``sys.modules`` and ``sys.argv[0] = path`` while it runs."""
    module = types.ModuleType(run_name)
    if init_globals is not None:
        module.__dict__.update(init_globals)
    module.__dict__.update(
        __file__=path, __cached__=None, __loader__=None, __package__=run_name.rpartition(".")[0], __spec__=None
    )
    missing = object()
    saved_module = sys.modules.get(run_name, missing)
    saved_argv0 = sys.argv[0] if sys.argv else missing
    sys.modules[run_name] = module
    if sys.argv:
        sys.argv[0] = path
    try:
        exec(code, module.__dict__)
    finally:
        if saved_module is missing:
            sys.modules.pop(run_name, None)
        else:
            sys.modules[run_name] = saved_module
        if saved_argv0 is not missing:
            sys.argv[0] = saved_argv0
    return dict(module.__dict__)


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


_ACTIVE_PID: int | None = None  # the process ``activate`` ran in
_original_os_exit = os._exit
_before_exit = []  # what runs before the metrics are written (torch_xla's part, once imported)


def _exit(status):
    """``os._exit``, after the exit work of this module's ``atexit`` handlers: a script
    that ends with ``os._exit(0)`` after real XLA work has its metrics. Only in the
    process the hook was activated in: a fork child (multiprocessing's workers end
    with ``os._exit``) holds its parent's counters, and a device it cannot use."""
    if os.getpid() == _ACTIVE_PID and os.environ.get(OUT_DIR_ENV):
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
            _runtime_watch().WATCH.write(out_dir)
    if STEPS.count:
        with contextlib.suppress(Exception):  # never break the script's exit
            _write_json(os.path.join(out_dir, f"{STEPS_PREFIX}{pid}.json"), STEPS.to_json())
    if "torch_xla" not in sys.modules:
        return  # this process never used XLA (a resource tracker, a tokenizer worker...)
    try:
        record = {"pid": pid, **(_METRICS_AT_EXIT or _read_metrics())}
    except Exception as error:  # report it; never break the script's exit
        record = {"pid": pid, "error": f"{type(error).__name__}: {error}"}
    _write_json(os.path.join(out_dir, f"metrics-{pid}.json"), record)
    if TRANSFERS.sites:
        _write_json(os.path.join(out_dir, f"{TRANSFERS_PREFIX}{pid}.json"), TRANSFERS.to_json())


def _write_json(path: str, record: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        json.dump(record, file)
    os.replace(path + ".tmp", path)


# -- shapes moved to the device ---------------------------------------------------------

_LOADER_MODULE = "torch_xla.distributed.parallel_loader"
# Frames in these places are not the user's code (the same test as the runner's).
_LIBRARY_FRAME = re.compile(r"(/site-packages/|/dist-packages/|/lib/python\d+\.\d+/|^<)")
_MAX_FRAMES_UP = 40  # looking for the user's frame above a library's transfer
#: Run-length entries kept per site: enough to show how shapes changed, bounded memory.
MAX_SHAPE_RUNS = 256
#: Transfers at one site within one step are told apart by their order (the k-th
#: ``v.to(device)`` of a dict comprehension); past this many they are not recorded.
MAX_SLOTS_PER_SITE = 16


class TransferLog:
    """Shapes moved to the XLA device, per site and step.

    A site is a place in the user's code (file, line, column of the call) and a slot:
    the k-th transfer there since the last ``torch_xla.sync`` (so a loop over a
    batch's tensors gives one sequence per tensor), and for a device loader the
    position of the tensor in the batch. Each site keeps its shapes run-length
    encoded: ``[[shape, times], ...]``.
    """

    def __init__(self) -> None:
        self.sites: dict[tuple, list[list]] = {}
        self._slots: dict[tuple, list[int]] = {}  # site -> [step, transfers this step]
        self.step = 0
        self.step_of = None  # reads the number of syncs so far, once torch_xla is imported
        self._columns: dict[tuple, int | None] = {}

    def record(self, kind: str, frame, path: list, shape: list[int]) -> None:
        if self.step_of is not None:
            self.step = self.step_of()
        code = frame.f_code
        place = (kind, code.co_filename, frame.f_lineno, self._column(code, frame.f_lasti))
        seen = self._slots.get(place)
        if seen is None or seen[0] != self.step:
            seen = self._slots[place] = [self.step, 0]
        slot = seen[1]
        seen[1] += 1
        if slot >= MAX_SLOTS_PER_SITE:
            # Not recorded: one slot for all the rest would mix different tensors
            # (the parameters of `model.to(device)`) into a false "change".
            return
        runs = self.sites.setdefault((*place, slot, tuple(path)), [])
        if runs and runs[-1][0] == shape:
            runs[-1][1] += 1
        elif len(runs) < MAX_SHAPE_RUNS:
            runs.append([shape, 1])

    def _column(self, code, lasti: int) -> int | None:
        """Start column of the expression running at ``lasti`` (Python 3.11+)."""
        key = (code, lasti)
        if key not in self._columns:
            column = None
            positions = getattr(code, "co_positions", None)
            if positions is not None:
                for index, position in enumerate(positions()):
                    if index == lasti // 2:
                        column = position[2]
                        break
            self._columns[key] = column
        return self._columns[key]

    def to_json(self) -> dict:
        return {
            "sites": [
                {"kind": kind, "file": file, "line": line, "col": col, "slot": slot, "path": list(path), "runs": runs}
                for (kind, file, line, col, slot, path), runs in self.sites.items()
            ]
        }


TRANSFERS = TransferLog()


class StepLimitReached(SystemExit):
    """Raised from the optimizer step hook after the last step ``--steps`` asked for."""


def _max_steps() -> int | None:
    try:
        value = int(os.environ.get(MAX_STEPS_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


class StepLog:
    """Optimizer steps (torch's global step hook: every optimizer, plain or through
    ``xm.optimizer_step``), when they ran, and the peak device memory."""

    def __init__(self) -> None:
        self.count = 0
        self.warm_at: float | None = None  # when step WARMUP_STEPS + 1 ended
        self.last_at: float | None = None
        self.peak_xla_bytes: int | None = None
        self._xla_memory = True  # False once the device has no memory statistics
        self._live_at: tuple[float, int] | None = None  # (when, count) of the last live write
        # Per step, for the first TIMELINE_STEPS: ms since the step before (None for the
        # first), and torch_xla's compiles so far (None without torch_xla).
        self.step_ms: list[float | None] = []
        self.step_compiles: list[int | None] = []
        self.limit = _max_steps()
        self.stopped = False  # True once the step limit ended the run

    def on_step(self, *_hook_args) -> None:
        now = time.perf_counter()
        self.count += 1
        if self.count <= TIMELINE_STEPS:
            self.step_ms.append(None if self.last_at is None else 1000 * (now - self.last_at))
            self.step_compiles.append(_compiles_so_far())
        if self.count == WARMUP_STEPS + 1:
            self.warm_at = now
        self.last_at = now
        if self._xla_memory and "torch_xla" in sys.modules:
            self._sample_xla_memory()
        last = self.limit is not None and self.count >= self.limit
        # Every one of the first steps (a run that hangs after a few quick steps is
        # reported at its latest), then at most every LIVE_INTERVAL_S.
        early = self.count <= LIVE_EVERY_STEP_UNTIL
        if last or early or self._live_at is None or now - self._live_at[0] >= LIVE_INTERVAL_S:
            with contextlib.suppress(Exception):  # a progress display never breaks the script
                self._write_live(now)
        with contextlib.suppress(Exception):
            _runtime_watch().WATCH.on_step_taken()

    def before_step(self, *_hook_args) -> None:
        """Stop the run when the step about to be taken is past ``--steps``: here, not
        right after the last step, so that the sync that ends the last step (after
        ``optimizer.step()``, or the device loader's at the next batch) has run and the
        last step is complete; the next step's graph, traced but never run, costs nothing."""
        if self.limit is not None and self.count >= self.limit and os.getpid() == _ACTIVE_PID:
            # Through the script's own exit: its exit handlers (ours write the metrics).
            self.stopped = True
            raise StepLimitReached(0)

    def _write_live(self, now: float) -> None:
        """The counters so far, and the time per step since the last write: read at a
        step (the script's own thread), never from a thread of ours."""
        out_dir = os.environ.get(OUT_DIR_ENV)
        if not out_dir:
            return
        record: dict = {"steps": self.count}
        if self._live_at is not None and self.count > self._live_at[1]:
            record["ms_per_step"] = 1000 * (now - self._live_at[0]) / (self.count - self._live_at[1])
        if "torch_xla" in sys.modules:
            import torch_xla.debug.metrics as met

            record["compiles"] = _compiles_so_far()
            data = met.metric_data("ExecuteTime")
            record["executions"] = int(data[0]) if data else 0
            transfers = met.metric_data("TransferFromDeviceTime")
            record["transfers"] = int(transfers[0]) if transfers else 0
        self._live_at = (now, self.count)
        _write_json(os.path.join(out_dir, f"{LIVE_PREFIX}{os.getpid()}.json"), record)

    def _sample_xla_memory(self) -> None:
        try:
            xlac = sys.modules["torch_xla"]._XLAC
            info = xlac._xla_memory_info(str(xlac._xla_get_default_device()))
            peak = int(info.get("peak_bytes_used") or info.get("bytes_used") or 0)
        except Exception:  # the CPU device has none
            self._xla_memory = False
            return
        if peak:
            self.peak_xla_bytes = max(self.peak_xla_bytes or 0, peak)

    def to_json(self) -> dict:
        timed = self.count - WARMUP_STEPS - 1
        seconds = (self.last_at - self.warm_at) if self.warm_at is not None and self.last_at is not None else 0.0
        record = {
            "steps": self.count,
            "warmup_steps": WARMUP_STEPS,
            "timed_steps": max(timed, 0),
            "timed_seconds": seconds,
            "peak_memory_bytes": self.peak_xla_bytes,
            "memory_of": "xla" if self.peak_xla_bytes else None,
            "step_ms": self.step_ms,
            "step_compiles": self.step_compiles,
            "stopped_at_limit": self.stopped,
        }
        torch = sys.modules.get("torch")
        if not self.peak_xla_bytes and torch is not None:
            with contextlib.suppress(Exception):
                if torch.cuda.is_initialized():
                    record["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated())
                    record["memory_of"] = "cuda"
        return record


STEPS = StepLog()


def _compiles_so_far() -> int | None:
    """torch_xla's UncachedCompile counter (a C++ counter read: microseconds), or None
    in a process without torch_xla."""
    if "torch_xla" not in sys.modules:
        return None
    try:
        import torch_xla.debug.metrics as met

        return int(met.counter_value("UncachedCompile") or 0)
    except Exception:
        return None


def _hook_optimizer_steps(torch_module) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_post_hook(STEPS.on_step)
    if STEPS.limit is not None:
        register_optimizer_step_pre_hook(STEPS.before_step)
    _runtime_watch().WATCH.install(torch_module, _innermost_user_frame)


def _runtime_watch():
    """The runtime watch (XLA501, XLA502, the loss): the copy next to this file in the
    hook folder, or the package's own when this module is imported from xlalint."""
    try:
        import _xlalint_runtime_watch as watch
    except ImportError:
        from xlalint.harness import runtime_watch as watch
    return watch


def _innermost_user_frame(frame):
    """The first frame of the user's code at or above ``frame``, or None."""
    depth = 0
    while frame is not None and _user_frame(frame) is None and depth < _MAX_FRAMES_UP:
        frame, depth = frame.f_back, depth + 1
    return frame if frame is not None and _user_frame(frame) is not None else None


_METRICS_AT_EXIT: dict | None = None


def _before_torch_xla_exit() -> None:
    """Runs before torch_xla's own exit handler (registered after it): take the metrics
    as the script left them, then read the kept losses (a transfer of their own)."""
    global _METRICS_AT_EXIT
    try:
        # The last step's executions may still run: wait, as torch_xla's handler would.
        sys.modules["torch_xla"]._XLAC._xla_wait_device_ops(devices=[])
        _METRICS_AT_EXIT = _read_metrics()
        _runtime_watch().WATCH.read_losses(sys.modules["torch_xla"]._XLAC)
        _runtime_watch().WATCH.read_step_losses(sys.modules["torch_xla"]._XLAC)
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


def _user_frame(frame):
    """``frame`` when it is in the user's code, else None."""
    return None if _LIBRARY_FRAME.search(frame.f_code.co_filename) else frame


def _hook_tensor_to(torch_xla_module) -> None:
    """Record ``tensor.to(xla_device)`` calls, at the user's line that made them.

    A call from library code (an HF ``Trainer`` preparing a batch) is recorded at the
    innermost user frame that led to it, as "library"; ``model.to(device)`` moves each
    parameter once, in its own slot, so those never count as a change.
    """
    import torch

    original_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        moved = original_to(self, *args, **kwargs)
        try:
            if moved is not self and moved.device.type == "xla" and self.device.type != "xla":
                caller = sys._getframe(1)
                frame, depth = caller, 0
                while frame is not None and _user_frame(frame) is None and depth < _MAX_FRAMES_UP:
                    frame, depth = frame.f_back, depth + 1
                if frame is not None and _user_frame(frame) is not None:
                    TRANSFERS.record("to" if frame is caller else "library", frame, [], list(moved.shape))
        except Exception:
            pass
        return moved

    to.__doc__ = original_to.__doc__
    torch.Tensor.to = to

    # Steps end at torch_xla.sync (xm.mark_step, xm.optimizer_step(barrier=True) and
    # the device loaders call it), which counts them. Read, not wrapped: torch_xla
    # tells a sync from other causes by the Python frames that call its step marker.
    counter_value = torch_xla_module._XLAC._xla_counter_value
    TRANSFERS.step_of = lambda: counter_value("MarkStep") or 0
    # After torch_xla's own exit handler was registered: runs before it.
    atexit.register(_before_torch_xla_exit)
    _before_exit.append(_before_torch_xla_exit)
    # Recorded now: a process killed before its exit handlers ran still imported it.
    out_dir = os.environ.get(OUT_DIR_ENV)
    if out_dir:
        with contextlib.suppress(Exception):
            _write_json(os.path.join(out_dir, f"metrics-{os.getpid()}.json"), {"pid": os.getpid(), "unfinished": True})


def _hook_device_loader(loader_module) -> None:
    """Record the tensors a ``MpDeviceLoader``/``ParallelLoader`` hands to the user's loop."""
    per_device = loader_module.PerDeviceLoader
    original_next = per_device.next

    def next_batch(self):
        batch = original_next(self)
        try:
            frame = sys._getframe(1)
            while frame is not None and _user_frame(frame) is None:
                frame = frame.f_back
            if frame is not None:
                for path, shape in _tensor_shapes(batch, []):
                    TRANSFERS.record("loader", frame, path, shape)
        except Exception:
            pass
        return batch

    per_device.next = next_batch


def _tensor_shapes(value, path: list, depth: int = 0):
    """(path, shape) of each tensor in a batch: nested tuples, lists and dicts."""
    if depth > 4:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _tensor_shapes(item, [*path, str(key)], depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value[:64]):
            yield from _tensor_shapes(item, [*path, index], depth + 1)
    elif hasattr(value, "shape") and hasattr(value, "device"):
        yield path, list(value.shape)


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
        fixed_path = _fixed_copy_of(script)
        if fixed_path is None:
            runpy.run_path(script, run_name="__main__")
        else:
            # The fixed code runs as the user's script: __file__ and sys.argv[0] are
            # the user's, so paths relative to the script still find its files.
            _run_code_as_file(_compile_fixed(fixed_path), script, "__main__")
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
