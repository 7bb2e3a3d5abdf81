"""XLA104 cuda-device: CUDA devices and CUDA-only APIs in a script meant for XLA.

A script written for a GPU names its device everywhere: ``torch.device("cuda")``,
``.cuda()``, ``.to("cuda:0")``, ``device="cuda"``, ``torch.cuda.synchronize()``,
CUDA autocast and a ``GradScaler``. On a TPU (or any PJRT device) each of these
either fails (no CUDA) or silently keeps the work on the CPU. The port is
mechanical: the device is ``torch_xla.device()``, the CUDA helpers have XLA
counterparts or are not needed at all.

The rule finds the *device expressions* (a literal ``"cuda"``/``"cuda:N"``, a
``torch.device`` of one, an integer device index, and the
``"cuda" if torch.cuda.is_available() else "cpu"`` idiom) where they are used as a
device, and the CUDA-only calls by their qualified names, so aliases
(``import torch as T``, ``from torch import cuda``) are found too. A string
``"cuda"`` that is not a device (``print("cuda")``, a dict key) and a device held in
a variable (``x.to(device)``) are left alone: the variable's definition is where
the finding is.

What to do with each ``torch.cuda.*`` / ``torch.accelerator.*`` name is data, in
``xlalint/rules/_cuda_api.py``; this module holds the mechanisms the table names
(replace, remove, report, the device, autocast, the scaler, availability).
"""

from __future__ import annotations

import ast
import re
from functools import cached_property

from xlalint.linter.model import (
    Fix,
    Import,
    Operation,
    RemoveKeyword,
    RemoveStatement,
    ReplaceExpr,
    SetKeyword,
    Span,
    UnwrapWith,
)
from xlalint.linter.rule import Invalid, Rule, Valid
from xlalint.linter.semantic import (
    ancestors,
    dotted_name,
    enclosing_statement,
    keyword,
    method_name,
    parent,
    string_value,
)
from xlalint.linter.values import assigned_values, is_self_attr
from xlalint.rules._cuda_api import (
    CUDA_BACKEND_CONSTANTS,
    CUDA_BACKENDS,
    DDP_DEVICE_KEYWORDS,
    DISTRIBUTED_DATA_PARALLEL,
    ENV_INIT_METHOD,
    INIT_PROCESS_GROUP,
    RUNTIME_GIVEN_ARGUMENTS,
    SHARE_MEMORY_METHODS,
    XLA_BACKEND,
    XLA_BACKEND_MODULE,
    XLA_INIT_METHOD,
    CudaApi,
    lookup,
)

# Methods checked on any receiver but torch's own modules: `.cuda()`, `.share_memory()`.
METHODS_CHECKED = frozenset({"cuda", *SHARE_MEMORY_METHODS})
# "cuda", "cuda:0", "cuda:12" -- the strings torch reads as a CUDA device.
CUDA_STRING = re.compile(r"cuda(:\d+)?")
# The other device strings: the "else" branch of a device selection.
OTHER_DEVICES = re.compile(r"(cpu|mps|xla|xpu|hpu|meta|tpu)(:\d+)?")

TORCH_DEVICE = frozenset({"torch.device"})
# Calls whose presence in a condition means "is there a CUDA device?".
AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.cuda.device_count", "torch.accelerator.is_available"})
# The calls that are False on an XLA machine: a condition built on them keeps the CPU path.
IS_AVAILABLE = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
CURRENT_ACCELERATOR = frozenset({"torch.accelerator.current_accelerator"})
# Methods that print or log their arguments (a memory report inside one can go).
OUTPUT_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "log", "write", "set_postfix", "set_description", "print"}
)
# The launchers that start worker processes: each worker must create the runtime itself.
SPAWNERS = frozenset(
    {"torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch", "torch_xla.torch_xla.launch"}
)
# Autocast that is CUDA whatever its arguments, and the device-generic ones that are
# CUDA when their `device_type` says so. The parameter names in positional order.
CUDA_AUTOCAST = {
    "torch.cuda.amp.autocast": ("enabled", "dtype", "cache_enabled"),
    "torch.cuda.amp.autocast_mode.autocast": ("enabled", "dtype", "cache_enabled"),
}
GENERIC_AUTOCAST = {
    "torch.autocast": ("device_type", "dtype", "enabled", "cache_enabled"),
    "torch.amp.autocast": ("device_type", "dtype", "enabled", "cache_enabled"),
    "torch.amp.autocast_mode.autocast": ("device_type", "dtype", "enabled", "cache_enabled"),
}
# The autocast arguments that keep their meaning on XLA.
KEPT_AUTOCAST_ARGS = ("enabled", "cache_enabled")
CUDA_GRAD_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
# `torch.amp.GradScaler(device="cuda", ...)`: "cuda" is also the default.
GENERIC_GRAD_SCALER = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})

# The uses of a CUDA stream or event (see `StreamRemoval`): statements that order
# streams or tie a tensor to one go; waiting for one is waiting for the XLA device.
STREAM_ORDERING_METHODS = frozenset({"wait_stream", "wait_event", "record_event", "record_stream", "record", "wait"})
STREAM_WAITING_METHODS = frozenset({"synchronize"})

# Gradient clipping (XLA106 wants `scaler.unscale_` before it).
CLIP_FUNCTIONS = frozenset({"clip_grad_norm_", "clip_grad_value_"})

# Keyword arguments whose value is a device, in any call.
DEVICE_KEYWORDS = frozenset({"device"})
# ...and the one whose CUDA value is replaced by "cpu": load on the host, then move.
MAP_LOCATION = "map_location"

# `.cuda(device=None, non_blocking=False, memory_format=...)`: what survives in `.to()`.
CUDA_METHOD_PARAMS = ("device", "non_blocking", "memory_format")
KEPT_CUDA_METHOD_ARGS = ("non_blocking", "memory_format")

# Expressions that need no parentheses in front of `.attr`.
ATOMIC = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Subscript,
    ast.Constant,
    ast.List,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
    ast.JoinedStr,
)


# --- what is a CUDA device --------------------------------------------------------------


def is_cuda_string(node: ast.AST | None) -> bool:
    """``"cuda"``, ``"cuda:1"``, ``f"cuda:{rank}"``, ``"cuda:{}".format(r)``, ``"cuda:%d" % r``."""
    value = string_value(node)
    if value is not None:
        return CUDA_STRING.fullmatch(value) is not None
    if isinstance(node, ast.JoinedStr) and node.values:
        head = string_value(node.values[0])
        if head is None:
            return False
        return head == "cuda:" if len(node.values) > 1 else CUDA_STRING.fullmatch(head) is not None
    if isinstance(node, ast.Call) and method_name(node) == "format":
        return (string_value(node.func.value) or "").startswith("cuda:")  # type: ignore[attr-defined]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return (string_value(node.left) or "").startswith("cuda:")
    return False


def is_device_index(node: ast.AST | None) -> bool:
    """An integer literal given as a device: CUDA device N."""
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
        and node.value >= 0
    )


def is_cuda_storage_lambda(node: ast.AST | None) -> bool:
    """``lambda storage, loc: storage.cuda()``, the old spelling of ``map_location="cuda"``."""
    return isinstance(node, ast.Lambda) and method_name(node.body) == "cuda"


def is_other_device_string(node: ast.AST | None) -> bool:
    value = string_value(node)
    return value is not None and OTHER_DEVICES.fullmatch(value) is not None


def argument(call: ast.Call, position: int, name: str) -> ast.AST | None:
    """The argument of ``call`` for the parameter ``name`` at ``position``."""
    kw = keyword(call, name)
    if kw is not None:
        return kw.value
    positional = [a for a in call.args if not isinstance(a, ast.Starred)]
    if len(positional) == len(call.args) and position < len(positional):
        return positional[position]
    return None


def has_star_args(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords)


def is_alone_on_its_lines(stmt: ast.stmt) -> bool:
    """True unless ``stmt`` shares a line with another statement (``a(); b()``):
    removing a statement removes its whole line."""
    container = parent(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        siblings = getattr(container, field, None)
        if isinstance(siblings, list) and any(s is stmt for s in siblings):
            return not any(
                other is not stmt
                and other.lineno <= (stmt.end_lineno or stmt.lineno)
                and stmt.lineno <= (other.end_lineno or other.lineno)
                for other in siblings
            )
    return True


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _int_parameter(func: ast.AST, name: str) -> bool:
    """``name`` is a parameter of ``func`` annotated ``int``."""
    args = func.args  # type: ignore[attr-defined]
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.arg == name:
            return _is_name(arg.annotation, "int") if arg.annotation is not None else False
    return False


def _index_suffix(parts: list[ast.AST]) -> bool:
    """The parts of a string that follow a device type are its index: ``:0``, or ``:``
    then a formatted value (``:{rank}``)."""
    if not parts:
        return False
    text = string_value(parts[0]) or ""
    if re.match(r":\d", text):
        return True
    return text == ":" and len(parts) > 1 and isinstance(parts[1], ast.FormattedValue)


def _is_self_attribute(node: ast.AST) -> bool:
    """``self.<attr>``."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def whole_statement(call: ast.Call) -> ast.Expr | None:
    """The expression statement that is nothing but ``call``, if it can be removed."""
    stmt = parent(call)
    if isinstance(stmt, ast.Expr) and is_alone_on_its_lines(stmt):
        return stmt
    return None


class CudaDevice(Rule):
    code = "XLA104"
    name = "cuda-device"
    summary = "CUDA device or CUDA-only API in an XLA script"
    explanation = """
## Why

On an XLA device (TPU, or any PJRT device) there is no CUDA: `.cuda()`,
`torch.device("cuda")` and `torch.cuda.*` calls raise, or, behind
`"cuda" if torch.cuda.is_available() else "cpu"`, quietly run the whole script on the
CPU. The XLA device is `torch_xla.device()` (`xm.xla_device()` before torch_xla 2.4).

## What is flagged

- `torch.device("cuda")`, `torch.device("cuda:1")`, `torch.device(f"cuda:{rank}")`,
  `torch.device(0)` (an integer is CUDA device N);
- a CUDA device passed as a device: `.to("cuda")`, `.to(0)`, `device="cuda"` or
  `device=0` to any call (`torch.zeros(3, device="cuda")`), a parameter default
  `def f(device="cuda")`;
- a variable or `self.<attr>` that only ever holds an int, passed as a device:
  `local_rank = int(os.environ["LOCAL_RANK"])` ... `model.to(local_rank)`, a parameter
  annotated `int` (`def __init__(self, gpu_id: int)` ... `x.to(self.gpu_id)`), the
  DDP-tutorial way to name CUDA device N; reported (and fixed) at each such use, since
  the variable is the process's rank too;
- `.cuda()` on anything (a tensor, a module, `storage.cuda()`);
- the selection idiom `"cuda" if torch.cuda.is_available() else "cpu"` (also with
  `torch.device(...)` branches, or any condition when the other branch is a device
  such as `"cpu"`), reported once, as a whole;
- `torch.cuda.synchronize()`, `torch.cuda.empty_cache()`, `torch.cuda.set_device(...)`,
  `torch.cuda.manual_seed(s)`, `torch.cuda.manual_seed_all(s)`;
- CUDA autocast: `torch.cuda.amp.autocast(...)`, `torch.autocast("cuda", ...)`,
  `torch.autocast(device_type="cuda")`, `torch.amp.autocast("cuda")`, and
  `torch.autocast(device_type=device)` where `device = "cuda"` (the AMP recipe);
- a CUDA `GradScaler`: `torch.cuda.amp.GradScaler(...)`, `torch.amp.GradScaler("cuda")`
  (and `torch.amp.GradScaler()`, whose default device is CUDA);
- `map_location="cuda:0"` (or another CUDA device) to `torch.load` and friends;
- `torch.accelerator.current_accelerator()` (on a torch_xla machine it is not the XLA
  device) and the rest of `torch.accelerator`;
- `torch.cuda.is_available()` / `torch.accelerator.is_available()` where it chooses the
  device: in the test of an `if` (or a conditional expression) whose branches set or
  use a device, or in a flag that such a test reads (`use_cuda = not args.no_cuda and
  torch.cuda.is_available()` ... `if use_cuda:`; `args.cuda = ...` too). On an XLA
  machine it is False, so the ported script would run on the CPU;
- a data-parallel script's CUDA parts (names in `xlalint/rules/_cuda_api.py`):
  `dist.init_process_group` with the `"nccl"` backend (`backend="nccl"`, positional
  `"nccl"`, `dist.Backend.NCCL`, a variable assigned one, a backend per device such as
  `"cpu:gloo,cuda:nccl"`, `"nccl" if torch.cuda.is_available() else "gloo"`, and
  `args.dist_backend` whose `add_argument` default is `"nccl"`); `device_ids=` and
  `output_device=` of `DistributedDataParallel` (unless they name the XLA device); and
  `model.share_memory()` / `t.share_memory_()` on something the script moves to a device
  (Hogwild training with `torch.multiprocessing`);
- every other `torch.cuda.*` call, from one table (`xlalint/rules/_cuda_api.py`): the
  memory API (`memory_allocated`, `max_memory_allocated`, `reset_peak_memory_stats`,
  ...), streams and device contexts (`torch.cuda.Stream()`, `torch.cuda.stream(s)`,
  `torch.cuda.current_stream()`, `torch.cuda.device(i)`, `torch.accelerator.device_index(i)`),
  events, graphs, NVTX, RNG state, tensor types. Each is fixed, or reported with its XLA
  replacement, or with "no XLA counterpart".

## What is not flagged

`torch.cuda.is_available()` that chooses no device; a `"cuda"` string that is not a device
(`print("cuda")`, a dict key); a device in a variable (`x.to(device)`);
`torch.device("cpu")`, `.to("xla")`; CUDA mentioned in comments or strings; files
outside the scope (no torch/torch_xla/transformers/tokenizers/accelerate import).

## The fix

Safe:
- a device expression becomes `torch_xla.device()`: `torch.device("cuda")` ->
  `torch_xla.device()`, `.to("cuda")` -> `.to(torch_xla.device())`, `device="cuda"` ->
  `device=torch_xla.device()`, the whole selection idiom -> `torch_xla.device()`;
- `.cuda()` -> `.to(torch_xla.device())`; the CUDA device index of `.cuda(0)` is
  dropped, `non_blocking=` and `memory_format=` are kept;
- `torch.cuda.synchronize()` -> `xm.wait_device_ops()`;
- `torch.cuda.manual_seed(s)` / `manual_seed_all(s)` -> `torch_xla.manual_seed(s)`
  (`xm.set_rng_state(s)` before 2.4);
- `torch.cuda.empty_cache()` and `torch.cuda.set_device(...)` statements are removed
  (no fix when the call is part of a larger expression);
- `map_location=<cuda>` -> `map_location="cpu"`: load on the host, then move the
  model to the XLA device;
- `torch.accelerator.current_accelerator()` -> `torch_xla.device()` (not where its value
  is formatted into a string, `torch.device(f"{acc}:{rank}")`: it is a device type
  there, and `xla:0:0` is no device),
  `torch.accelerator.synchronize()` -> `xm.wait_device_ops()`,
  `torch.cuda.is_bf16_supported()` -> `True`; `reset_peak_memory_stats()` and the other
  statistics resets are removed;
- a device string that is also autocast's `device_type` (`device = "cuda"` ...
  `torch.autocast(device_type=device)`) becomes `"xla"`, which is both;
- a stream or device context, `with torch.cuda.stream(s):` or `with torch.cuda.device(i):`
  (also `torch.cuda.StreamContext`, `torch.cuda.device_of`,
  `torch.accelerator.device_index`), is replaced by its body, dedented; in a `with` of
  several items (`with torch.cuda.stream(s), torch.no_grad():`) only that item goes.
  Comments stay: those above the `with` and on its line go above the body, those that
  close the body after it. An `as` name goes with the context when nothing reads it
  (the context binds None); when something does, and in an `async with`, there is no fix;
- a stream or event (`torch.cuda.Stream()`, `torch.cuda.current_stream()`,
  `torch.cuda.Event()`), assigned to a variable or `self.<attr>`, is removed with every
  use when each use only orders streams: `with torch.cuda.stream(s):` keeps its body,
  `s.wait_stream(...)`, `torch.cuda.current_stream().wait_stream(s)`, `x.record_stream(s)`,
  `e.record(s)`, `s.wait_event(e)`, `torch.cuda.set_stream(s)` are removed, and
  `s.synchronize()` -> `xm.wait_device_ops()`; such a statement on
  `torch.cuda.current_stream()` itself goes too. Any other use (an event's
  `elapsed_time`, `s.query()`, the stream passed to a function) leaves it reported, with
  the line that stands in the way: `torch.cuda.Stream()` raises without CUDA, so the
  stream cannot stay while its uses go, nor go while a use stays.

- `dist.init_process_group(backend="nccl")` ->
  `dist.init_process_group(backend="xla", init_method="xla://")`, with
  `import torch_xla.distributed.xla_backend` (it registers the backend and the rendezvous;
  torch_xla's own DDP guide does the same). `"xla://"` takes each process's rank and the
  world size from the XLA runtime (`xr.global_ordinal()`, `xr.world_size()`), reads
  `MASTER_ADDR`/`MASTER_PORT` as `"env://"` does (so an explicit `init_method="env://"`
  is replaced too), and under torchrun tells the runtime which local device is this
  process's. A backend per device keeps the others: `"cpu:gloo,cuda:nccl"` ->
  `"cpu:gloo,xla:xla"`. A `backend = "nccl"` variable is replaced where it is passed;
- `DDP(model, device_ids=[local_rank], output_device=local_rank)` ->
  `DDP(model, device_ids=[torch_xla.device()])`. The indices are CUDA devices. torch 2.9's
  DDP keeps them for a module on the XLA device and moves every input to `xla:<index>` on
  a CUDA-style side stream, which raises (`'NoneType' object does not support the context
  manager protocol`) for every index but the process's own device: in every process but
  the first. This process's XLA device (index 0) keeps what the script relies on: DDP
  moves the inputs there, as it moved them to the GPU. Where the call runs at import time
  in a script that spawns workers, `device_ids` is removed instead (the device cannot be
  evaluated there, and `torch.device("xla")` has no index): DDP then leaves the inputs
  where the script puts them. Indices passed by position have no fix.

These are safe because an XLA process has one device and no user streams: the compiler
orders the work. A CUDA stream or device decides where and in which order kernels run,
never what they compute, so without it the body computes the same. `with
torch.cuda.graph(g):` is not unwrapped: its body is captured to run at each
`g.replay()`, not where it stands.

Where the device would be evaluated at import time, the fix writes
`torch.device("xla")` instead of `torch_xla.device()`: in a default argument
(`def f(device="cuda")`), and in module-level code (the `__main__` block included) of a
script that spawns workers (`xmp.spawn`, `torch_xla.launch`). `torch_xla.device()`
there creates the XLA runtime in the launcher, and every worker then fails with
"Runtime is already initialized". `torch.device("xla")` is the default XLA device of
whichever process uses it and creates nothing until a tensor is moved.

A selection whose other branch is the user's own logic
(`"cuda:0" if torch.cuda.is_available() else os.environ.get("DEVICE", "cpu")`) is
fixed only with `--unsafe-fixes`: the fix drops that fallback, and a fix that drops
user logic is not safe. Messages spell the XLA API as the fix writes it for the
`target-version` (`xm.xla_device()` before 2.4).

Unsafe:
- `dist.init_process_group` given `rank=`/`world_size=`, or an `init_method` of its own
  (`"tcp://..."`, a variable): the fix drops them for `init_method="xla://"`, whose rank
  and world size are the XLA runtime's (torch passes explicit ones to the rendezvous, and
  `"xla://"` ignores them). They agree with torchrun's and `torch_xla.launch`'s, not
  always with a numbering of the script's own. A backend chosen by a condition
  (`"nccl" if torch.cuda.is_available() else "gloo"`) becomes `"xla"`, dropping the
  fallback: on an XLA machine the condition picks gloo, which cannot reduce XLA tensors.
  With a `store=`, or `*args`/`**kwargs`, there is no fix;
- a flag or test built on `is_available()` that chooses the device: the call goes
  from `... and torch.cuda.is_available()` (or becomes `True`), so every path puts the
  model on the XLA device (`--no-cuda`-style options keep working);
- `torch.cuda.current_device()` -> `xr.local_ordinal()` (the index of this process's
  XLA device);
- a memory query (`torch.cuda.max_memory_allocated()`, ...) in a statement that only
  prints or logs it: the statement is removed. XLA's `xm.get_memory_info()` is named
  in the message but is not written by the fix: the CPU device has no allocator
  statistics and it raises there. A query used any other way has no fix.

Unsafe (they change the numerics):
- CUDA autocast -> `torch.autocast("xla", dtype=torch.bfloat16)`, keeping `enabled=`
  and `cache_enabled=`: XLA devices compute in bfloat16, not float16;
- the `GradScaler` is removed with its uses: bfloat16 has float32's range and needs no
  loss scaling, and torch_xla 2.9 has no GradScaler. `scaler = GradScaler()` goes,
  `scaler.scale(loss).backward()` -> `loss.backward()`, `scaler.step(opt)` ->
  `opt.step()`, `scaler.update()`, `scaler.unscale_(opt)` and
  `scaler.load_state_dict(...)` go, `scaler.get_scale()` -> `1.0`,
  `scaler.state_dict()` -> `{}`. The scaler may be a variable or a `self.<attr>`,
  assigned more than once when every assignment builds a CUDA scaler (the PyTorch AMP
  recipe does); when it is used any other way (passed to a function, tested against
  `None`) the finding has no fix, and its message names the line that blocks it.

No fix:
- `model.share_memory()` on a model the script moves to a device: once ported that is the
  XLA device, and XLA tensors cannot be shared between processes (`RuntimeError:
  _share_fd_: only available on CPU`). Train with one process per XLA device
  (`torch_xla.launch`), each keeping its own copy in step (DDP, `xm.optimizer_step`), or
  keep the shared model on the CPU;
- a backend from a command-line option whose default is `"nccl"` (`--dist-backend`):
  change the default, or pass `xla`, and initialize as above.

The fixes add `import torch_xla` / `import torch_xla.core.xla_model as xm` as needed.

## Example

```python
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().cuda()
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    loss = model(x.to(device))
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
```
becomes (with `--unsafe-fixes`)
```python
device = torch_xla.device()
model = Net().to(torch_xla.device())
with torch.autocast("xla", dtype=torch.bfloat16):
    loss = model(x.to(device))
loss.backward()
opt.step()
```
"""
    fix_availability = "sometimes"

    VALID = [
        Valid(
            """
            import torch
            if torch.cuda.is_available():
                print("cuda")
            names = {"cuda": 1}
            x = torch.zeros(3).to(device)
            y = torch.device("cpu")
            z = x.to("xla")
            # model.cuda()
            s = "model.cuda()"
            """
        ),
        Valid(
            """
            import torch
            import torch_xla
            device = torch_xla.device()
            model = model.to(device)
            t = torch.ones(2, device=device)
            state = torch.load("ckpt.pt", map_location="cpu")
            with torch.autocast("xla", dtype=torch.bfloat16):
                pass
            scaler = torch.amp.GradScaler("cpu")
            """
        ),
        # A file outside the scope: no torch import.
        Valid("import cupy\nx = cupy.zeros(3).cuda()\ny = x.to('cuda')\n"),
        # A bare function that happens to be called `cuda`, and a dtype given to `.to`.
        Valid("import torch\nfrom mylib import cuda\ncuda()\nx = torch.ones(2).to(torch.float16)\n"),
        # Not a device position: a comparison, a label, `device_type` of a profiler.
        Valid('import torch\nif device == "cuda":\n    pass\nlabel = ("cuda", 0)\n'),
        # Plain integers that are not devices.
        Valid("import torch\nx = torch.zeros(3).to(torch.float32)\ny = t.view(0)\nz = f(0)\n"),
        # A variable that is not always an int: it may hold a device.
        Valid("import torch\ndevice = 0 if args.cpu_ids else torch.device('cpu')\nx = torch.ones(2).to(device)\n"),
        # A "cuda" string in a variable that is never used as a device.
        Valid('import torch\nbackend = "cuda"\nprint(backend)\nx = torch.ones(2).to(device)\n'),
        # A device *type* derived from a device string (the device is reported where it
        # is set); it feeds `autocast(device_type=...)`, not a device position.
        Valid(
            """
            import torch
            kind = "cuda" if "cuda" in args.device else "cpu"
            use = "cuda" if args.device.startswith("cuda") else "cpu"
            ctx = torch.autocast(device_type=kind, dtype=torch.bfloat16)
            """
        ),
        # A DDP script written for XLA, a CPU process group, a backend chosen on the command
        # line without a CUDA default, and a Hogwild model that stays on the CPU.
        Valid(
            """
            import torch
            import torch.distributed as dist
            import torch_xla
            import torch_xla.distributed.xla_backend
            from torch.nn.parallel import DistributedDataParallel as DDP
            dist.init_process_group("xla", init_method="xla://")
            model = DDP(Net().to(torch_xla.device()), gradient_as_bucket_view=True, device_ids=None)
            other = DDP(Net().to("xla"), device_ids=[torch_xla.device()])
            dist.init_process_group("gloo")
            parser.add_argument("--backend", default="gloo")
            dist.init_process_group(backend=args.backend)
            cpu_model = Net()
            cpu_model.share_memory()
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            device = torch.device("cuda")
            """,
            fixed="""
            import torch
            import torch_xla

            device = torch_xla.device()
            """,
        ),
        Invalid(
            """
            import torch
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            other = "cuda:0" if torch.cuda.is_available() else "cpu"
            """,
            fixed="""
            import torch
            import torch_xla

            device = torch_xla.device()
            other = torch_xla.device()
            """,
            count=2,
        ),
        Invalid(
            """
            import torch
            import torch_xla
            model = Net().cuda()
            x = batch.cuda(non_blocking=True)
            y = batch.cuda(0)
            """,
            fixed="""
            import torch
            import torch_xla
            model = Net().to(torch_xla.device())
            x = batch.to(torch_xla.device(), non_blocking=True)
            y = batch.to(torch_xla.device())
            """,
            count=3,
        ),
        Invalid(
            """
            import torch as T
            x = T.zeros(3, device="cuda")
            y = x.to("cuda:1")
            z = x.to(0)
            """,
            fixed="""
            import torch as T
            import torch_xla

            x = T.zeros(3, device=torch_xla.device())
            y = x.to(torch_xla.device())
            z = x.to(torch_xla.device())
            """,
            count=3,
        ),
        # An int variable is CUDA device N: each use is fixed, the rank itself is kept.
        Invalid(
            """
            import os
            import torch
            class Worker:
                def __init__(self, net, gpu: int):
                    self.gpu = gpu
                    self.rank = int(os.environ["RANK"])
                    self.net = net.to(gpu)
                def step(self, x):
                    return self.net(x.to(self.gpu)), self.rank
            """,
            fixed="""
            import os
            import torch
            import torch_xla

            class Worker:
                def __init__(self, net, gpu: int):
                    self.gpu = gpu
                    self.rank = int(os.environ["RANK"])
                    self.net = net.to(torch_xla.device())
                def step(self, x):
                    return self.net(x.to(torch_xla.device())), self.rank
            """,
            count=2,
        ),
        # Before torch_xla 2.4 the device is `xm.xla_device()`.
        Invalid(
            """
            import torch
            model.cuda()
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm

            model.to(xm.xla_device())
            """,
            target_version="2.3",
        ),
        Invalid(
            """
            import torch
            from torch import cuda
            import torch_xla.core.xla_model as xm
            cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.set_device(local_rank)
            torch.cuda.manual_seed_all(seed)
            """,
            fixed="""
            import torch
            from torch import cuda
            import torch_xla
            import torch_xla.core.xla_model as xm

            xm.wait_device_ops()
            torch_xla.manual_seed(seed)
            """,
            count=4,
        ),
        # Removing is only possible for a whole statement.
        Invalid(
            """
            import torch
            ok = torch.cuda.empty_cache() or True
            """,
            count=1,
        ),
        Invalid(
            """
            import torch
            state = torch.load("ckpt.pt", map_location="cuda:0")
            other = torch.load("ckpt.pt", map_location=torch.device("cuda"))
            third = torch.load("ckpt.pt", map_location=lambda storage, loc: storage.cuda())
            """,
            fixed="""
            import torch
            state = torch.load("ckpt.pt", map_location="cpu")
            other = torch.load("ckpt.pt", map_location="cpu")
            third = torch.load("ckpt.pt", map_location="cpu")
            """,
            count=3,
        ),
        Invalid(
            """
            import torch
            with torch.cuda.amp.autocast(enabled=use_amp):
                out = model(x)
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                out = model(x)
            """,
            unsafe_fixed="""
            import torch
            with torch.autocast("xla", dtype=torch.bfloat16, enabled=use_amp):
                out = model(x)
            with torch.autocast("xla", dtype=torch.bfloat16):
                out = model(x)
            """,
            count=2,
        ),
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = model(x)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                scaler.step(opt)
                scaler.update()
            """,
            unsafe_fixed="""
            import torch
            for x, y in loader:
                with torch.autocast("xla", dtype=torch.bfloat16):
                    loss = model(x)
                loss.backward()
                opt.step()
            """,
            count=2,
        ),
        # A clip with no `unscale_` (XLA106 may insert one in the same pass): the
        # construction goes one pass later; the end result is the same.
        Invalid(
            """
            import torch
            scaler = torch.cuda.amp.GradScaler()
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            scaler.step(opt)
            scaler.update()
            """,
            unsafe_fixed="""
            import torch
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            """,
            count=1,
        ),
        # A scaler passed to a helper cannot be removed: reported without a fix.
        Invalid(
            """
            import torch
            scaler = torch.amp.GradScaler("cuda")
            train(model, scaler)
            """,
            count=1,
        ),
        # A device held in a variable is reported where the variable is assigned;
        # `map_location` of such a device loads onto the CPU instead.
        Invalid(
            """
            import torch
            device = "cuda"
            model = Net().to(device)
            state = torch.load("ckpt.pt", map_location=device)
            """,
            fixed="""
            import torch
            import torch_xla

            device = torch_xla.device()
            model = Net().to(device)
            state = torch.load("ckpt.pt", map_location="cpu")
            """,
            count=2,
        ),
        # ...but not when the variable is also used as a string.
        Invalid(
            """
            import torch
            device = "cuda:0"
            x = torch.ones(2, device=device)
            if "cuda" in device:
                pass
            """,
            count=1,
        ),
        # Two functions, two scalers: each is removed with its own uses.
        Invalid(
            """
            import torch
            def train(opt, loss):
                scaler = torch.cuda.amp.GradScaler()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            def finetune(opt, loss):
                scaler = torch.cuda.amp.GradScaler(init_scale=1024)
                scaler.scale(loss * 2).backward()
                scaler.step(opt)
                scaler.update()
            """,
            unsafe_fixed="""
            import torch
            def train(opt, loss):
                loss.backward()
                opt.step()
            def finetune(opt, loss):
                (loss * 2).backward()
                opt.step()
            """,
            count=2,
        ),
        Invalid(
            """
            import torch
            def train(model, device="cuda"):
                return model.to(device)
            """,
            fixed="""
            import torch
            import torch_xla

            def train(model, device=torch.device("xla")):
                return model.to(device)
            """,
        ),
        # Today's pytorch/examples: `torch.accelerator` is not the XLA device, and the flag
        # built on `is_available()` (False on an XLA machine) chooses the device.
        Invalid(
            """
            import torch
            use_accel = not args.no_accel and torch.accelerator.is_available()
            if use_accel:
                device = torch.accelerator.current_accelerator()
            else:
                device = torch.device("cpu")
            """,
            fixed="""
            import torch
            import torch_xla

            use_accel = not args.no_accel and torch.accelerator.is_available()
            if use_accel:
                device = torch_xla.device()
            else:
                device = torch.device("cpu")
            """,
            unsafe_fixed="""
            import torch
            import torch_xla

            use_accel = not args.no_accel
            if use_accel:
                device = torch_xla.device()
            else:
                device = torch.device("cpu")
            """,
            count=2,
        ),
        # The older examples: the flag is an attribute; a direct test is the same thing.
        Invalid(
            """
            import torch
            args.cuda = not args.no_cuda and torch.cuda.is_available()
            if args.cuda:
                model.cuda()
            if torch.cuda.is_available():
                batch = batch.to(args.device)
            """,
            fixed="""
            import torch
            import torch_xla

            args.cuda = not args.no_cuda and torch.cuda.is_available()
            if args.cuda:
                model.to(torch_xla.device())
            if torch.cuda.is_available():
                batch = batch.to(args.device)
            """,
            unsafe_fixed="""
            import torch
            import torch_xla

            args.cuda = not args.no_cuda
            if args.cuda:
                model.to(torch_xla.device())
            if True:
                batch = batch.to(args.device)
            """,
            count=3,
        ),
        # The memory API: a reset goes; a query has no XLA value that works on every device.
        Invalid(
            """
            import torch
            torch.cuda.reset_peak_memory_stats()
            peak = torch.cuda.max_memory_allocated()
            print(f"{torch.cuda.memory_allocated() / 2**20:.0f} MiB")
            """,
            fixed="""
            import torch
            peak = torch.cuda.max_memory_allocated()
            print(f"{torch.cuda.memory_allocated() / 2**20:.0f} MiB")
            """,
            unsafe_fixed="""
            import torch
            peak = torch.cuda.max_memory_allocated()
            """,
            count=3,
        ),
        # A side stream: the `with` keeps its body (and its comments), the stream goes
        # with every statement that orders streams; waiting for it is waiting for the device.
        Invalid(
            """
            import torch
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # overlap with the copy
                # on the side stream
                y = model(x)
            torch.cuda.current_stream().wait_stream(side)
            y.record_stream(torch.cuda.current_stream())
            side.synchronize()
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm

            # overlap with the copy
            # on the side stream
            y = model(x)
            xm.wait_device_ops()
            """,
            count=5,
        ),
        # Device contexts: only the CUDA item of a `with` goes; a one-line `with` and an
        # `as` name that nothing reads (the context binds None) are unwrapped too.
        Invalid(
            """
            import torch
            with torch.cuda.device(rank), torch.no_grad():
                out = model(x)
            for x in batches:
                with torch.cuda.device(rank): out = model(x)
            with torch.cuda.stream(s) as unused:
                out = model(x)
            """,
            fixed="""
            import torch
            with torch.no_grad():
                out = model(x)
            for x in batches:
                out = model(x)
            out = model(x)
            """,
            count=3,
        ),
        # No fix: an event that times (it has no XLA value), an `as` name that is read,
        # a captured CUDA graph (its body runs at each replay), a name with no counterpart.
        Invalid(
            """
            import torch
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            with torch.cuda.stream(s) as ctx:
                print(ctx)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = model(x)
            torch.cuda.set_sync_debug_mode(1)
            print(start.elapsed_time(end))
            """,
            count=5,
        ),
        Invalid(
            """
            import torch
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            index = torch.cuda.current_device()
            torch.accelerator.synchronize()
            """,
            fixed="""
            import torch
            import torch_xla.core.xla_model as xm

            dtype = torch.bfloat16
            index = torch.cuda.current_device()
            xm.wait_device_ops()
            """,
            unsafe_fixed="""
            import torch
            import torch_xla.core.xla_model as xm
            import torch_xla.runtime as xr

            dtype = torch.bfloat16
            index = xr.local_ordinal()
            xm.wait_device_ops()
            """,
            count=3,
        ),
        Invalid(
            """
            import torch
            device = f"cuda:{rank}"
            model.to(device)
            other = torch.device(f"cuda:{local_rank}")
            """,
            fixed="""
            import torch
            import torch_xla

            device = torch_xla.device()
            model.to(device)
            other = torch_xla.device()
            """,
            count=2,
        ),
        # A device string that is also autocast's `device_type` stays a string; that
        # autocast is CUDA's, and goes to bfloat16 like any other.
        Invalid(
            """
            import torch
            device = "cuda"
            x = torch.ones(2, device=device)
            with torch.autocast(device_type=device, dtype=torch.float16):
                pass
            """,
            fixed="""
            import torch
            device = "xla"
            x = torch.ones(2, device=device)
            with torch.autocast(device_type=device, dtype=torch.float16):
                pass
            """,
            unsafe_fixed="""
            import torch
            device = "xla"
            x = torch.ones(2, device=device)
            with torch.autocast("xla", dtype=torch.bfloat16):
                pass
            """,
            count=2,
        ),
        # A script that spawns workers: module-level code runs in the launcher, which must
        # not create the XLA runtime; `torch.device("xla")` creates nothing.
        Invalid(
            """
            import torch
            import torch_xla
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            def _mp_fn(index):
                model = Net().to(device)
                batch = torch.zeros(2, device="cuda")
            if __name__ == "__main__":
                torch_xla.launch(_mp_fn)
            """,
            fixed="""
            import torch
            import torch_xla
            device = torch.device("xla")
            def _mp_fn(index):
                model = Net().to(device)
                batch = torch.zeros(2, device=torch_xla.device())
            if __name__ == "__main__":
                torch_xla.launch(_mp_fn)
            """,
            count=2,
        ),
        # A fallback that is the user's own logic: only the unsafe fix drops it.
        Invalid(
            """
            import os
            import torch
            device = torch.device("cuda:0" if torch.cuda.is_available() else os.environ.get("DEVICE", "cpu"))
            """,
            unsafe_fixed="""
            import os
            import torch
            import torch_xla

            device = torch_xla.device()
            """,
            count=1,
        ),
        # The AMP recipe builds its scaler twice: both go, with every use.
        Invalid(
            """
            import torch
            scaler = torch.amp.GradScaler("cuda")
            for x in data:
                scaler.scale(model(x)).backward()
                scaler.step(opt)
                scaler.update()
            scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
            for x in data:
                scaler.scale(model(x)).backward()
                scaler.step(opt)
                scaler.update()
            state = {"scaler": scaler.state_dict()}
            """,
            unsafe_fixed="""
            import torch
            for x in data:
                model(x).backward()
                opt.step()
            for x in data:
                model(x).backward()
                opt.step()
            state = {"scaler": {}}
            """,
            count=2,
        ),
        # A torchrun DDP script: the "nccl" backend becomes torch_xla's, with the rendezvous
        # that takes rank and world size from the XLA runtime; DDP loses its CUDA indices.
        Invalid(
            """
            import os
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP
            local_rank = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local_rank)
            dist.init_process_group(backend="nccl")
            model = DDP(Net().to(local_rank), device_ids=[local_rank], output_device=local_rank)
            """,
            fixed="""
            import os
            import torch
            import torch.distributed as dist
            import torch_xla
            import torch_xla.distributed.xla_backend
            from torch.nn.parallel import DistributedDataParallel as DDP

            local_rank = int(os.environ["LOCAL_RANK"])
            dist.init_process_group(backend="xla", init_method="xla://")
            model = DDP(Net().to(torch_xla.device()), device_ids=[torch_xla.device()])
            """,
            count=4,
        ),
        # The rank and world size a script passes, and its own rendezvous address, give way
        # to the XLA runtime's: only the unsafe fix drops them. "env://" goes safely (both
        # rendezvous read MASTER_ADDR and MASTER_PORT).
        Invalid(
            """
            import torch.distributed as dist
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            dist.init_process_group(dist.Backend.NCCL, "tcp://10.0.0.1:23456")
            dist.init_process_group("NCCL", init_method="env://")
            """,
            fixed="""
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend

            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            dist.init_process_group(dist.Backend.NCCL, "tcp://10.0.0.1:23456")
            dist.init_process_group("xla", init_method="xla://")
            """,
            unsafe_fixed="""
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend

            dist.init_process_group("xla", init_method="xla://")
            dist.init_process_group("xla", "xla://")
            dist.init_process_group("xla", init_method="xla://")
            """,
            count=3,
        ),
        # A CUDA-or-CPU choice of backend: on an XLA machine it picks gloo, which cannot
        # reduce XLA tensors; only the unsafe fix drops the fallback. A backend per device
        # keeps the others.
        Invalid(
            """
            import torch
            import torch.distributed as dist
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend)
            dist.init_process_group(backend="cpu:gloo,cuda:nccl")
            """,
            fixed="""
            import torch
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend

            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group(backend)
            dist.init_process_group(backend="cpu:gloo,xla:xla", init_method="xla://")
            """,
            unsafe_fixed="""
            import torch
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend

            backend = "nccl" if torch.cuda.is_available() else "gloo"
            dist.init_process_group("xla", init_method="xla://")
            dist.init_process_group(backend="cpu:gloo,xla:xla", init_method="xla://")
            """,
            count=2,
        ),
        # No fix: a backend from a command-line option that defaults to "nccl", device
        # indices passed to DDP by position, and a Hogwild model shared between processes
        # (XLA tensors cannot be).
        Invalid(
            """
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel
            parser.add_argument("--dist-backend", default="nccl", type=str)
            dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url)
            ddp = DistributedDataParallel(model, [rank])
            model = Net().to(device)
            model.share_memory()
            """,
            count=3,
        ),
    ]

    # -- the walk ------------------------------------------------------------------------
    def begin(self) -> None:
        # Nodes inside a finding already made (the "cuda" of a reported
        # `torch.device("cuda")`): a finding is reported once, at one node.
        self._claimed: set[int] = set()
        # `torch.device(...)` calls given as `map_location`: their fix is "cpu".
        self._map_locations: set[int] = set()
        # Variables assigned a CUDA device, by (scope, name), and the variables
        # used as a device: `device = "cuda"` ... `x.to(device)` (judged in `finish`).
        self._device_variables: dict[tuple[int, str], list[ast.AST]] = {}
        self._variable_uses: list[tuple[ast.Name, bool]] = []
        self._locals: dict[int, set[str]] = {}
        # `torch.cuda.is_available()` calls, judged in `finish` (do they choose the device?).
        self._availability_calls: list[ast.Call] = []
        # `torch.autocast(device_type=<variable>)`: CUDA autocast if the variable is "cuda".
        self._autocast_by_variable: list[tuple[ast.Call, ast.Name, tuple[str, ...]]] = []
        # A script that starts workers must not create the XLA runtime in the parent.
        self._spawns_workers = any(self.ctx.semantic.call_name(c) in SPAWNERS for c in self.ctx.semantic.calls)

    def finish(self) -> None:
        self._check_device_variables()
        self._check_availability()
        self._check_autocast_by_variable()

    def _check_autocast_by_variable(self) -> None:
        for call, name, params in self._autocast_by_variable:
            values = self._device_variables.get((id(self.scope_of(name)), name.id), [])
            if values and all(is_cuda_string(v) for v in values):
                self._report(
                    call,
                    f'CUDA autocast (`{name.id}` is a CUDA device): on XLA use `torch.autocast("xla", '
                    "dtype=torch.bfloat16)`",
                    self._autocast_fix(call, params),
                )

    def visit_Call(self, node: ast.Call) -> None:
        name = self.ctx.semantic.call_name(node)
        row = lookup(name) if name else None
        if name in TORCH_DEVICE:
            self._check_torch_device(node)
        elif name in GENERIC_AUTOCAST:
            self._check_autocast(node, name)
        elif name in GENERIC_GRAD_SCALER:
            self._check_grad_scaler(node, name)
        elif name in INIT_PROCESS_GROUP:
            self._check_process_group(node)
        elif name in DISTRIBUTED_DATA_PARALLEL:
            self._check_ddp(node)
        elif row is not None:
            self._check_api(node, name, *row)
        elif (method := method_name(node)) in METHODS_CHECKED and not (name or "").startswith("torch."):
            if method == "cuda":
                self._check_cuda_method(node)
            else:
                self._check_share_memory(node)
        self._check_device_arguments(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and self._is_cuda_device(node.value):
            key = (id(self.scope_of(node.targets[0])), node.targets[0].id)
            self._device_variables.setdefault(key, []).append(node.value)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        if self._is_device_selection(node):
            self._report_device(node, "CUDA device selection")

    def visit_arguments(self, node: ast.arguments) -> None:
        """``def f(device="cuda")``: a parameter default that is a CUDA device."""
        positional = [*node.posonlyargs, *node.args]
        pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults))
        pairs += [(arg, default) for arg, default in zip(node.kwonlyargs, node.kw_defaults) if default is not None]
        for arg, default in pairs:
            if arg.arg == "device" and (is_cuda_string(default) or self._is_device_selection(default)):
                self._report_device(default, f"CUDA device as the default of `{arg.arg}`")

    # -- device expressions -----------------------------------------------------------------
    def _is_device_selection(self, node: ast.AST | None) -> bool:
        """``"cuda" if torch.cuda.is_available() else "cpu"``: a conditional with a CUDA
        branch whose condition asks about CUDA, or whose other branch is a device."""
        if not isinstance(node, ast.IfExp):
            return False
        branches = (node.body, node.orelse)
        cuda = [b for b in branches if self._is_cuda_device(b)]
        if not cuda:
            return False
        asks_cuda = any(
            self.ctx.semantic.call_name(n) in AVAILABILITY for n in ast.walk(node.test) if isinstance(n, ast.Call)
        )
        if not asks_cuda and _inspects_device_string(node.test):
            # ``"cuda" if "cuda" in device else "cpu"`` derives a device *type* from a
            # device reported where it is set; as a type it feeds `autocast(device_type=)`
            # and string comparisons, which `torch_xla.device()` would break.
            return False
        other = [b for b in branches if b not in cuda]
        return asks_cuda or not other or any(self._is_any_device(b) for b in other)

    def _is_cuda_device(self, node: ast.AST) -> bool:
        """A CUDA device value: a CUDA string, ``torch.device(<cuda>)``, a selection."""
        if is_cuda_string(node):
            return True
        if isinstance(node, ast.Call) and self.ctx.semantic.call_name(node) in TORCH_DEVICE:
            return self._torch_device_is_cuda(node)
        if isinstance(node, ast.Call) and self.ctx.semantic.call_name(node) in CURRENT_ACCELERATOR:
            return True
        return self._is_device_selection(node)

    def _is_any_device(self, node: ast.AST) -> bool:
        if is_other_device_string(node) or self._is_cuda_device(node):
            return True
        if isinstance(node, ast.Call):
            name = self.ctx.semantic.call_name(node) or ""
            return name in TORCH_DEVICE or name.startswith("torch_xla.")
        return isinstance(node, ast.IfExp) and (self._is_any_device(node.body) or self._is_any_device(node.orelse))

    def _torch_device_is_cuda(self, call: ast.Call) -> bool:
        kind = argument(call, 0, "type")
        return is_cuda_string(kind) or is_device_index(kind) or self._is_device_selection(kind)

    def _check_torch_device(self, call: ast.Call) -> None:
        if self._torch_device_is_cuda(call):
            self._report_device(call, "`torch.device` of a CUDA device")
        elif isinstance(kind := argument(call, 0, "type"), ast.Name):
            self._variable_uses.append((kind, False))

    # -- availability that chooses the device ---------------------------------------------------
    def _check_availability(self) -> None:
        """``torch.cuda.is_available()`` (or ``torch.accelerator.is_available()``) is False on
        an XLA machine: where it decides the device, directly (``if torch.cuda.is_available():
        model.cuda()``) or through a flag (``use_cuda = not args.no_cuda and
        torch.cuda.is_available()`` ... ``if use_cuda:``), the ported script would take the
        CPU path. Reported at the call; the unsafe fix treats the XLA device as available."""
        for call in self._availability_calls:
            if id(call) in self._claimed or self.ctx.semantic.call_name(call) not in IS_AVAILABLE:
                continue
            text = self._short_source(call)
            test_of = self._condition_holding(call)
            if test_of is not None:
                if self._chooses_device(test_of):
                    self._report(
                        call,
                        f"`{text}` chooses the device: it is False on an XLA machine, so the script "
                        "would run on the CPU",
                        self._assume_available_fix(call),
                    )
                continue
            flag = self._flag_set_by(call)
            if flag is None:
                continue
            chooser = next((c for c in self._conditions_reading(flag) if self._chooses_device(c)), None)
            if chooser is not None:
                self._report(
                    call,
                    f"`{flag}` is computed from `{text}` and chooses the device (line {chooser.lineno}): "
                    "it is False on an XLA machine, so the script would run on the CPU",
                    self._assume_available_fix(call),
                )

    @staticmethod
    def _condition_holding(call: ast.Call) -> ast.If | ast.IfExp | None:
        """The ``if`` statement or conditional expression whose test holds ``call``."""
        child: ast.AST = call
        for holder in ancestors(call):
            if isinstance(holder, (ast.If, ast.IfExp)):
                return holder if child is holder.test else None
            if isinstance(holder, ast.stmt):
                return None
            child = holder
        return None

    @staticmethod
    def _flag_set_by(call: ast.Call) -> str | None:
        """``use_cuda`` / ``args.cuda`` for ``<flag> = <a boolean built on call>``."""
        stmt = enclosing_statement(call)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target = stmt.target
        else:
            return None
        # Only through `and`/`or`/`not`: a flag, not a value passed on or compared.
        for holder in ancestors(call):
            if holder is stmt:
                break
            if not isinstance(holder, (ast.BoolOp, ast.UnaryOp)):
                return None
        return dotted_name(target)

    def _conditions_reading(self, flag: str) -> list[ast.If | ast.IfExp]:
        found = []
        for node in self.ctx.semantic.nodes_of(ast.If, ast.IfExp):
            if any(
                isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and dotted_name(n) == flag
                for n in ast.walk(node.test)
            ):
                found.append(node)
        return found

    def _chooses_device(self, condition: ast.If | ast.IfExp) -> bool:
        """A branch of ``condition`` is a device, sets one or uses one: ``.cuda()``,
        ``.to(...)``, a ``torch.device``, the current accelerator, ``device = "cuda"``."""
        if isinstance(condition, ast.IfExp):
            if any(self._is_any_device(b) for b in (condition.body, condition.orelse)):
                return True
            branches: list[ast.AST] = [condition.body, condition.orelse]
        else:
            branches = [*condition.body, *condition.orelse]
        for branch in branches:
            for node in ast.walk(branch):
                if isinstance(node, ast.Call):
                    if method_name(node) in ("cuda", "to"):
                        return True
                    if self.ctx.semantic.call_name(node) in TORCH_DEVICE | CURRENT_ACCELERATOR:
                        return True
                elif isinstance(node, ast.Assign) and self._is_any_device(node.value):
                    return True
        return False

    def _assume_available_fix(self, call: ast.Call) -> Fix:
        """``not args.no_cuda and torch.cuda.is_available()`` -> ``not args.no_cuda``;
        ``a if torch.cuda.is_available() else b`` -> ``a``; anywhere else ``True``."""
        holder = parent(call)
        if not (isinstance(holder, ast.BoolOp) and isinstance(holder.op, ast.And)):
            return self.fix("unsafe", "Treat the XLA device as available", self._true(call))
        others = [v for v in holder.values if v is not call]
        pieces = []
        for index, value in enumerate(others):
            loose = isinstance(value, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr))
            pieces.append(f"({{v{index}}})" if loose else f"{{v{index}}}")
        parts = tuple((f"v{index}", self.ctx.span(value)) for index, value in enumerate(others))
        span, template = self.ctx.span(holder), " and ".join(pieces)
        return self.fix("unsafe", "Treat the XLA device as available", ReplaceExpr(span, template, parts))

    # -- devices held in variables --------------------------------------------------------------
    def _check_device_variables(self) -> None:
        """``device = "cuda"`` used as a device (``x.to(device)``) is reported at the
        string; ``map_location=device`` of a CUDA ``device`` is reported at the name:
        once the device is ``torch_xla.device()``, ``torch.load`` cannot map onto it."""
        used_as_device: set[tuple[int, str]] = set()
        for name, is_map_location in self._variable_uses:
            key = (id(self.scope_of(name)), name.id)
            if key not in self._device_variables:
                continue
            if is_map_location:
                fix = self.fix(
                    "safe", 'Load onto the CPU: `map_location="cpu"`', ReplaceExpr(self.ctx.span(name), '"cpu"')
                )
                message = (
                    f"`map_location={name.id}` is a CUDA device (an XLA device once ported, "
                    "which `torch.load` cannot map onto): load onto the CPU"
                )
                self._report(name, message, fix)
            else:
                used_as_device.add(key)
        for key in used_as_device:
            for value in self._device_variables[key]:
                # A string: `"cuda:0"`, `f"cuda:{rank}"` (a `torch.device` or a selection
                # is reported where it is written).
                if is_cuda_string(value):
                    message = f"CUDA device `{self._short_source(value)}` assigned to `{key[1]}`, used as a device"
                    if self._used_as_string(key):
                        # `"cuda" in device`, `device.startswith(...)`: a torch.device is no str.
                        self._report(value, message + " (and as a string: port it by hand)", None)
                    elif self._used_as_device_type(key):
                        # `torch.autocast(device_type=device)` needs a str: "xla" is both.
                        fix = self.fix("safe", 'Use `"xla"`', ReplaceExpr(self.ctx.span(value), '"xla"'))
                        self._report(value, message + ' and as a `device_type`: use `"xla"`', fix)
                    else:
                        self._report_device(value, message)

    def _used_as_device_type(self, key: tuple[int, str]) -> bool:
        for node in self.ctx.semantic.nodes_of(ast.Name):
            if node.id != key[1] or not isinstance(node.ctx, ast.Load) or id(self.scope_of(node)) != key[0]:
                continue
            holder = parent(node)
            if isinstance(holder, ast.keyword) and holder.arg == "device_type":
                return True
            if (
                isinstance(holder, ast.Call)
                and holder.args
                and holder.args[0] is node
                and self.ctx.semantic.call_name(holder) in GENERIC_AUTOCAST
            ):
                return True
        return False

    def _used_as_string(self, key: tuple[int, str]) -> bool:
        for node in self.ctx.semantic.nodes_of(ast.Name):
            if not (node.id == key[1] and isinstance(node.ctx, ast.Load)):
                continue
            if id(self.scope_of(node)) != key[0]:
                continue
            holder = parent(node)
            if isinstance(holder, (ast.Attribute, ast.Subscript, ast.BinOp)):
                return True
            if isinstance(holder, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in holder.ops):
                return True
        return False

    def scope_of(self, name: ast.Name) -> ast.AST:
        """The function whose local ``name`` is, or the module."""
        for scope in ancestors(name):
            if isinstance(
                scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
            ) and name.id in self._function_locals(scope):
                return scope
        return self.ctx.tree

    def _values_of(self, name: ast.Name) -> list[ast.AST]:
        """The values assigned to ``name`` in its own scope (not in nested functions)."""
        return list(assigned_values(self.scope_of(name), lambda t: _is_name(t, name.id), shallow=True))

    def _function_locals(self, func: ast.AST) -> set[str]:
        if id(func) not in self._locals:
            args = func.args  # type: ignore[attr-defined]
            names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
            names |= {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            declared_global = {g for n in ast.walk(func) if isinstance(n, (ast.Global, ast.Nonlocal)) for g in n.names}
            self._locals[id(func)] = names - declared_global
        return self._locals[id(func)]

    def _check_device_arguments(self, call: ast.Call) -> None:
        """``.to(<cuda>)``, ``device=<cuda>``, ``map_location=<cuda>`` in any call."""
        values: list[tuple[ast.AST, bool]] = []
        if method_name(call) == "to" and call.args:
            values.append((call.args[0], False))
        for kw in call.keywords:
            if kw.arg in DEVICE_KEYWORDS:
                values.append((kw.value, False))
            elif kw.arg == MAP_LOCATION:
                values.append((kw.value, True))
        for value, is_map_location in values:
            if not is_map_location and self._holds_device_index(value):
                # `model.to(local_rank)`: reported where it is used, since the variable is
                # the process's rank too (the fix replaces this use only).
                self._report_device(
                    value, f"device `{self._short_source(value)}` is an int, which torch reads as a CUDA device index"
                )
                continue
            if isinstance(value, ast.Name):
                self._variable_uses.append((value, is_map_location))
                continue
            if isinstance(value, ast.Call) and self.ctx.semantic.call_name(value) in TORCH_DEVICE:
                # Reported by `_check_torch_device` when its turn comes (children
                # are visited after their parent).
                if is_map_location:
                    self._map_locations.add(id(value))
                continue
            if is_map_location and is_cuda_storage_lambda(value):
                self._report_device(value, "`map_location` moves storages to CUDA", to_cpu=True)
            elif is_cuda_string(value) or is_device_index(value) or self._is_device_selection(value):
                where = "`map_location`" if is_map_location else "a device argument"
                self._report_device(value, f"CUDA device as {where}", to_cpu=is_map_location)

    def _holds_device_index(self, node: ast.AST) -> bool:
        """A variable or ``self.<attr>`` that only ever holds an int: each assignment is
        an int literal, ``int(...)`` (``local_rank = int(os.environ["LOCAL_RANK"])``) or
        a parameter annotated ``int``; or a parameter annotated ``int`` itself."""
        last = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if last not in self._int_candidates:
            return False  # most device arguments: nothing of that name is ever an int
        if isinstance(node, ast.Name):
            scope = self.scope_of(node)
            values = self._values_of(node)
            if scope is not self.ctx.tree and _int_parameter(scope, node.id):
                return not values
        elif _is_self_attribute(node):
            owner = next((a for a in ancestors(node) if isinstance(a, ast.ClassDef)), None)
            if owner is None:
                return False
            values = list(assigned_values(owner, lambda t: is_self_attr(t, node.attr)))  # type: ignore[attr-defined]
        else:
            return False
        return bool(values) and all(self._is_int(value) for value in values)

    @cached_property
    def _int_candidates(self) -> frozenset[str]:
        """The names (and ``self.<attr>`` attributes) that something in the module may make
        an int: parameters annotated ``int``, and targets assigned an int literal,
        ``int(...)`` or one of those parameters. A cheap first test for
        ``_holds_device_index``, which runs on every device argument."""
        semantic = self.ctx.semantic
        parameters = {
            arg.arg
            for arg in semantic.nodes_of(ast.arg)
            if arg.annotation is not None and _is_name(arg.annotation, "int")
        }
        names = set(parameters)
        for statement in semantic.nodes_of(ast.Assign, ast.AnnAssign):
            value = statement.value
            if value is None or not (
                is_device_index(value)
                or (isinstance(value, ast.Name) and value.id in parameters)
                or (isinstance(value, ast.Call) and _is_name(value.func, "int"))
            ):
                continue
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(
                t.id if isinstance(t, ast.Name) else t.attr for t in targets if isinstance(t, (ast.Name, ast.Attribute))
            )
        return frozenset(names)

    def _is_int(self, value: ast.AST) -> bool:
        if is_device_index(value):
            return True
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "int":
            return True
        if isinstance(value, ast.Name):
            scope = self.scope_of(value)
            return scope is not self.ctx.tree and _int_parameter(scope, value.id)
        return False

    def _report_device(self, node: ast.AST, message: str, to_cpu: bool = False) -> None:
        """Report a device expression; its fix replaces it with the XLA device (or
        with ``"cpu"`` for ``map_location``)."""
        if id(node) in self._claimed:
            return
        if to_cpu or id(node) in self._map_locations:
            fix = self.fix("safe", 'Load onto the CPU: `map_location="cpu"`', ReplaceExpr(self.ctx.span(node), '"cpu"'))
            message += ': load onto the CPU (`map_location="cpu"`), then move to the XLA device'
        else:
            device, imports = self._xla_device(node)
            message += f": use `{device}`"
            if self._evaluated_at_import(node):
                message += " (a device that does not start the XLA runtime when the module is imported)"
            fallback = self._fallback_of(node)
            applicability = "safe"
            if fallback is not None:
                # The other branch is the user's own choice of device: the fix drops it.
                applicability = "unsafe"
                message += f"; the fix drops the fallback `{self._short_source(fallback)}`"
            fix = self.fix(applicability, f"Use `{device}`", ReplaceExpr(self.ctx.span(node), device), imports=imports)
        self._report(node, message, fix)

    def _formatted_into_string(self, call: ast.Call) -> int | None:
        """The line where the name or ``self.<attr>`` that ``call`` is assigned to is
        formatted into a device string with an index (``f"{acc}:{rank}"``), if there is one."""
        stmt = parent(call)
        if not (isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is call):
            return None
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1:
            return None
        target = targets[0]
        if isinstance(target, ast.Name):
            scope = self.scope_of(target)

            def same(node: ast.AST) -> bool:
                return isinstance(node, ast.Name) and node.id == target.id and self.scope_of(node) is scope

        elif _is_self_attribute(target):
            owner = next((a for a in ancestors(stmt) if isinstance(a, ast.ClassDef)), None)

            def same(node: ast.AST) -> bool:
                return (
                    _is_self_attribute(node)
                    and node.attr == target.attr  # type: ignore[attr-defined]
                    and next((a for a in ancestors(node) if isinstance(a, ast.ClassDef)), None) is owner
                )

        else:
            return None
        # Followed by ":<index>": `f"{acc}:{rank}"`, `str(acc) + f":{rank}"` (a log line,
        # `print(f"device: {acc}")`, reads fine as "xla:0").
        for node in self.ctx.semantic.nodes_of(ast.JoinedStr):
            for i, value in enumerate(node.values):
                if isinstance(value, ast.FormattedValue) and same(value.value) and _index_suffix(node.values[i + 1 :]):
                    return node.lineno
        for node in self.ctx.semantic.nodes_of(ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1 and same(node.args[0]):
                holder = parent(node)
                if isinstance(holder, ast.BinOp) and holder.left is node:
                    right = holder.right
                    if _index_suffix(right.values if isinstance(right, ast.JoinedStr) else [right]):
                        return node.lineno
        return None

    def _xla_device(self, node: ast.AST | None = None) -> tuple[str, tuple[Import, ...]]:
        """The XLA device as a fix writes it at ``node``: ``torch_xla.device()`` (``xm.xla_device()``
        before 2.4), or, where it would be evaluated at import time, ``torch.device("xla")``:
        the default XLA device of whichever process uses it, which starts no runtime."""
        if node is not None and self._evaluated_at_import(node):
            torch, imports = self.ctx.reference("torch")
            _, backend = self.ctx.reference("torch_xla")  # `import torch_xla` registers the "xla" device
            return f'{torch}.device("xla")', (*imports, *backend)
        function, imports = self.ctx.xla_api("device", "xla_device")
        return f"{function}()", imports

    def _evaluated_at_import(self, node: ast.AST) -> bool:
        """A default argument (evaluated when the ``def`` runs), or module-level code in a
        script that spawns workers: the parent would create the XLA runtime before the
        launcher, and every worker fails with "Runtime is already initialized"."""
        for holder in ancestors(node):
            if isinstance(holder, ast.arguments):
                return True
            if isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return False
        return self._spawns_workers

    def _fallback_of(self, node: ast.AST) -> ast.AST | None:
        """The non-CUDA branch of a device selection when it is the user's logic (an
        environment variable, a command-line option), not a plain device like ``"cpu"``."""
        selection = node
        if isinstance(node, ast.Call) and self.ctx.semantic.call_name(node) in TORCH_DEVICE:
            selection = argument(node, 0, "type")
        if not isinstance(selection, ast.IfExp):
            return None
        for branch in (selection.body, selection.orelse):
            if not self._is_plain_device(branch):
                return branch
        return None

    def _is_plain_device(self, node: ast.AST) -> bool:
        if is_other_device_string(node) or self._is_cuda_device(node):
            return True
        if isinstance(node, ast.Call):
            name = self.ctx.semantic.call_name(node) or ""
            if name in TORCH_DEVICE:
                kind = argument(node, 0, "type")
                return kind is None or is_other_device_string(kind) or self._is_plain_device(kind)
            return name.startswith("torch_xla.")
        if isinstance(node, ast.IfExp):
            return self._is_plain_device(node.body) and self._is_plain_device(node.orelse)
        return False

    def _short_source(self, node: ast.AST, limit: int = 60) -> str:
        text = " ".join(self.ctx.source_of(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    # -- `.cuda()` ----------------------------------------------------------------------------
    def _check_cuda_method(self, call: ast.Call) -> None:
        receiver = call.func.value  # type: ignore[attr-defined]
        device, _ = self._xla_device(call)
        self._report(
            call,
            f"`.cuda()` moves to a CUDA device: use `.to({device})`",
            self._cuda_method_fix(call, receiver),
            keep=receiver,
        )

    def _cuda_method_fix(self, call: ast.Call, receiver: ast.AST) -> Fix | None:
        if has_star_args(call) or len(call.args) > 2 or any(kw.arg not in CUDA_METHOD_PARAMS for kw in call.keywords):
            return None
        device, imports = self._xla_device(call)
        # The receiver's source (parentheses included) is kept as it is.
        arguments = [device]
        parts: list[tuple[str, Span]] = [("receiver", self.ctx.span(receiver))]
        for position, name in enumerate(CUDA_METHOD_PARAMS):
            value = argument(call, position, name)
            if value is not None and name in KEPT_CUDA_METHOD_ARGS:
                arguments.append(f"{name}={{{name}}}")
                parts.append((name, self.ctx.span(value)))
        template = "{receiver}.to(" + ", ".join(arguments) + ")"
        return self.fix(
            "safe", f"Use `.to({device})`", ReplaceExpr(self.ctx.span(call), template, tuple(parts)), imports=imports
        )

    # -- torch.cuda.* and torch.accelerator.*: the table in `_cuda_api` ---------------------------
    def _check_api(self, call: ast.Call, name: str, short: str, row: CudaApi) -> None:
        if row.action == "availability":
            self._availability_calls.append(call)
        elif row.action == "device":
            if name in CURRENT_ACCELERATOR and (line := self._formatted_into_string(call)):
                # `torch.device(f"{acc}:{rank}")`: the accelerator is a device *type* there;
                # `torch_xla.device()` is `xla:0` and would make it "xla:0:0".
                message = f"{row.message}; line {line} formats it into a device string: port it by hand"
                self._report(call, message, None)
            else:
                self._report_device(call, row.message)
        elif row.action == "autocast":
            self._check_autocast(call, name)
        elif row.action == "grad_scaler":
            self._check_grad_scaler(call, name)
        elif row.action == "remove":
            stmt = whole_statement(call)
            fix = self.fix("safe", f"Remove `{short}(...)`", RemoveStatement(self.ctx.span(stmt))) if stmt else None
            self._report(call, self._spell(row.message, call, short)[0], fix)
        elif row.action == "query":
            stmt = self._output_statement(call)
            fix = None
            if stmt is not None:
                fix = self.fix("unsafe", "Remove the CUDA memory report", RemoveStatement(self.ctx.span(stmt)))
            message = self._spell(row.message, call, short)[0]
            if fix is not None:
                message += "; the unsafe fix removes this report"
            self._report(call, message, fix)
        elif row.action == "replace":
            self._report(call, self._spell(row.message, call, short)[0], self._replace_fix(call, short, row))
        elif row.action == "context":
            self._check_context(call, short, row)
        elif row.action == "stream":
            self._check_stream(call, short, row)
        else:
            self._report(call, self._spell(row.message, call, short)[0], None)

    def _output_statement(self, call: ast.Call) -> ast.Expr | None:
        """The statement that only prints or logs ``call``'s value: ``print(...)``,
        ``logger.info(...)``, ``pbar.set_postfix(...)``."""
        stmt = enclosing_statement(call)
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and is_alone_on_its_lines(stmt)):
            return None
        output = stmt.value
        if isinstance(output.func, ast.Name) and output.func.id == "print":
            return stmt
        return stmt if method_name(output) in OUTPUT_METHODS else None

    def _replace_fix(self, call: ast.Call, short: str, row: CudaApi) -> Fix | None:
        if call.keywords or has_star_args(call) or len(call.args) != row.arguments:
            return None
        code, imports = self._spell(row.template or "", call, short)
        if code == "True":
            return self.fix(row.applicability, "Use `True`", self._true(call))
        parts = (("arg0", self.ctx.span(call.args[0])),) if row.arguments else ()
        return self.fix(
            row.applicability,
            f"Use `{code.replace('{arg0}', '...')}`",
            ReplaceExpr(self.ctx.span(call), code, parts),
            imports=imports,
        )

    def _true(self, call: ast.Call) -> ReplaceExpr:
        """``call`` is True on XLA: ``a if call else b`` -> ``a``; elsewhere ``True``."""
        holder = parent(call)
        if isinstance(holder, ast.IfExp) and holder.test is call:
            # The body binds tighter than the conditional it replaces: no parentheses.
            return ReplaceExpr(self.ctx.span(holder), "{body}", (("body", self.ctx.span(holder.body)),))
        return ReplaceExpr(self.ctx.span(call), "True")

    def _spell(self, text: str, node: ast.AST, short: str = "") -> tuple[str, tuple[Import, ...]]:
        """Fill the table's placeholders with the names this file and target version use,
        and collect the imports the names need (``{arg0}`` is left for the fix)."""
        spellers = {
            "xm": lambda: self.ctx.reference("torch_xla.core.xla_model", "xm"),
            "xr": lambda: self.ctx.reference("torch_xla.runtime", "xr"),
            "torch_xla": lambda: self.ctx.reference("torch_xla"),
            "device": lambda: self._xla_device(node),
            "manual_seed": lambda: self.ctx.xla_api("manual_seed", "set_rng_state"),
        }
        imports: list[Import] = []
        for key, speller in spellers.items():
            if "{" + key + "}" in text:
                spelled, needed = speller()
                text = text.replace("{" + key + "}", spelled)
                imports.extend(needed)
        return text.replace("{name}", short), tuple(imports)

    # -- streams, events and device contexts ------------------------------------------------------
    def _check_context(self, call: ast.Call, short: str, row: CudaApi) -> None:
        """``with torch.cuda.stream(s):``, ``with torch.cuda.device(i):``: on XLA the body
        means the same without the context, so the ``with`` goes (or only this item)."""
        message = self._spell(row.message, call, short)[0]
        unwrap, refusal = self.unwrap(call)
        if unwrap is None:
            self._report(call, f"{message} (no fix: {refusal})", None)
            return
        fix = self.fix("safe", f"Drop `{short}(...)`, keep the body of the `with`", unwrap)
        self._report(call, f"{message}; the fix keeps the body of the `with` without it", fix)

    def unwrap(self, call: ast.Call) -> tuple[UnwrapWith | None, str]:
        """The operation that takes ``call`` out of its ``with``, or None and why not."""
        item = parent(call)
        if not (isinstance(item, ast.withitem) and item.context_expr is call):
            return None, "it is not the context of a `with`"
        if isinstance(parent(item), ast.AsyncWith):
            return None, "an `async with`"
        target = item.optional_vars
        if target is not None:
            # These contexts enter as None: `as name` can go only if nothing reads the name.
            if not isinstance(target, ast.Name):
                return None, f"the `with` binds `{self._short_source(target)}`"
            read = self._read_of(target)
            if read is not None:
                return None, f"line {read.lineno} reads `{target.id}`, which the `with` sets to None"
        return UnwrapWith(self.ctx.span(call)), ""

    def _read_of(self, name: ast.Name) -> ast.Name | None:
        """A read of the variable ``name`` binds, in its scope."""
        scope = self.scope_of(name)
        for node in self.ctx.semantic.nodes_of(ast.Name):
            if node.id == name.id and isinstance(node.ctx, ast.Load) and self.scope_of(node) is scope:
                return node
        return None

    def _check_stream(self, call: ast.Call, short: str, row: CudaApi) -> None:
        message = self._spell(row.message, call, short)[0]
        removal = StreamRemoval(self, call)
        fix = removal.fix()
        if fix is None:
            message += f" (remove it by hand: {removal.blocker})"
        else:
            message += "; the fix removes it with what uses it"
        self._report(call, message, fix)

    # -- autocast -------------------------------------------------------------------------------
    def _check_autocast(self, call: ast.Call, name: str) -> None:
        params = CUDA_AUTOCAST.get(name) or GENERIC_AUTOCAST[name]
        device_type = argument(call, 0, "device_type")
        if name in GENERIC_AUTOCAST and isinstance(device_type, ast.Name):
            # `torch.autocast(device_type=device)`: CUDA when `device = "cuda"` (judged in `finish`).
            self._autocast_by_variable.append((call, device_type, params))
            return
        if name in GENERIC_AUTOCAST and not is_cuda_string(device_type):
            return
        self._report(
            call,
            'CUDA autocast: on XLA use `torch.autocast("xla", dtype=torch.bfloat16)`',
            self._autocast_fix(call, params),
        )

    def _autocast_fix(self, call: ast.Call, params: tuple[str, ...]) -> Fix | None:
        if has_star_args(call):
            return None
        torch, imports = self.ctx.reference("torch")
        arguments = ['"xla"', f"dtype={torch}.bfloat16"]
        parts: list[tuple[str, Span]] = []
        for position, name in enumerate(params):
            value = argument(call, position, name)
            if value is not None and name in KEPT_AUTOCAST_ARGS:
                arguments.append(f"{name}={{{name}}}")
                parts.append((name, self.ctx.span(value)))
        template = f"{torch}.autocast(" + ", ".join(arguments) + ")"
        return self.fix(
            "unsafe",
            "Autocast to bfloat16 on XLA",
            ReplaceExpr(self.ctx.span(call), template, tuple(parts)),
            imports=imports,
            unused_imports=self._imported_name(call.func),
        )

    def _imported_name(self, func: ast.AST) -> tuple[Import, ...]:
        """``from torch.cuda.amp import autocast``: the import the fix may leave unused."""
        binding = self.ctx.semantic.imports.import_binding(func)
        return (binding,) if binding is not None else ()

    # -- GradScaler -----------------------------------------------------------------------------
    def _check_grad_scaler(self, call: ast.Call, name: str) -> None:
        if name in GENERIC_GRAD_SCALER:
            device = argument(call, 0, "device")
            if device is not None and not is_cuda_string(device):
                return
        removal = ScalerRemoval(self, call)
        fix = removal.fix()
        message = "CUDA `GradScaler`: bfloat16 autocast on XLA needs no loss scaling"
        if fix is None:
            message += f" (remove the scaler by hand: {removal.blocker})"
        self._report(call, message, fix)

    def is_cuda_grad_scaler(self, node: ast.AST | None) -> bool:
        if not isinstance(node, ast.Call):
            return False
        name = self.ctx.semantic.call_name(node)
        if name in CUDA_GRAD_SCALER:
            return True
        if name in GENERIC_GRAD_SCALER:
            device = argument(node, 0, "device")
            return device is None or is_cuda_string(device)
        return False

    # -- torch.distributed: the backend, DDP's devices, memory shared between processes ------------
    def _check_process_group(self, call: ast.Call) -> None:
        """``dist.init_process_group(backend="nccl")``: NCCL moves CUDA tensors only; on XLA
        the backend is "xla", and ``init_method="xla://"`` takes the rank and the world size
        from the XLA runtime."""
        backend = argument(call, 0, "backend")
        if backend is None:
            return
        wanted = (
            f'`dist.init_process_group("{XLA_BACKEND}", init_method="{XLA_INIT_METHOD}")` '
            f"(with `import {XLA_BACKEND_MODULE}`)"
        )
        # `backend = "nccl" if torch.cuda.is_available() else "gloo"` ... `init_process_group(backend)`:
        # the value is judged where it is written, the fix replaces the argument.
        value = self._only_value(backend)
        fallback = None
        if self._names_nccl(backend):
            replacement = f'"{XLA_BACKEND}"'
        elif (device_map := _device_map_on_xla(value)) is not None:
            # "cpu:gloo,cuda:nccl": CPU tensors keep gloo, XLA tensors get the xla backend.
            replacement = device_map
        elif isinstance(value, ast.IfExp) and (nccl := [b for b in (value.body, value.orelse) if self._names_nccl(b)]):
            # `"nccl" if torch.cuda.is_available() else "gloo"`: False on an XLA machine, and
            # gloo cannot reduce XLA tensors. The fix drops the user's fallback: unsafe.
            replacement = f'"{XLA_BACKEND}"'
            fallback = next((b for b in (value.body, value.orelse) if b not in nccl), None)
        else:
            option = self._option_defaulting_to_nccl(backend)
            if option is not None:
                source = self._short_source(backend)
                message = (
                    f'`{source}` is "nccl" by default (line {option.lineno}), a backend that runs on CUDA only: '
                    f"on XLA use {wanted}"
                )
                self._report(backend, message, None)
            return
        message = f'the "nccl" backend runs on CUDA only: use {wanted}; rank and world size come from the XLA runtime'
        fix, dropped, refusal = self._process_group_fix(call, backend, replacement, fallback)
        if fix is None:
            message += f" (no fix: {refusal})"
        elif dropped:
            message += "; the fix drops " + ", ".join(dropped)
        self._report(backend, message, fix)

    def _process_group_fix(
        self, call: ast.Call, backend: ast.AST, replacement: str, fallback: ast.AST | None
    ) -> tuple[Fix | None, list[str], str]:
        """The fix, what it drops of the user's code (each makes it unsafe), or why there is none."""
        if has_star_args(call):
            return None, [], "the call passes `*args` or `**kwargs`"
        # Positionally: backend, init_method, timeout, world_size, rank, store.
        if len(call.args) > 3 or keyword(call, "store") is not None:
            return None, [], "a process group given its own store, or rank and world size by position"
        operations: list[Operation] = [ReplaceExpr(self.ctx.span(backend), replacement)]
        dropped = [f"the fallback `{self._short_source(fallback)}`"] if fallback is not None else []
        init_method = argument(call, 1, "init_method")
        if init_method is None:
            operations.append(SetKeyword(self.ctx.span(call), "init_method", f'"{XLA_INIT_METHOD}"'))
        elif string_value(init_method) != XLA_INIT_METHOD:
            if string_value(init_method) != ENV_INIT_METHOD:
                # A tcp:// or file:// address of the user's own: "xla://" finds the master itself.
                dropped.append(f"the rendezvous `{self._short_source(init_method)}`")
            operations.append(ReplaceExpr(self.ctx.span(init_method), f'"{XLA_INIT_METHOD}"'))
        for name in RUNTIME_GIVEN_ARGUMENTS:
            given = keyword(call, name)
            if given is not None:
                # Ignored under "xla://": the runtime's own rank and world size replace them.
                dropped.append(f"`{name}={self._short_source(given.value)}`")
                operations.append(RemoveKeyword(self.ctx.span(call), name))
        imports = () if self.ctx.semantic.imports.imports_module(XLA_BACKEND_MODULE) else (Import(XLA_BACKEND_MODULE),)
        fix = self.fix(
            "unsafe" if dropped else "safe",
            f'Use the "{XLA_BACKEND}" backend and `init_method="{XLA_INIT_METHOD}"`',
            *operations,
            imports=imports,
        )
        return fix, dropped, ""

    def _only_value(self, node: ast.AST) -> ast.AST:
        """The one value a variable is ever assigned in its scope, or ``node`` itself."""
        if not isinstance(node, ast.Name):
            return node
        values = self._values_of(node)
        return values[0] if len(values) == 1 else node

    def _names_nccl(self, node: ast.AST) -> bool:
        """``"nccl"``, ``dist.Backend.NCCL``, or a variable only ever assigned one of them."""
        if self._is_nccl_constant(node):
            return True
        if not isinstance(node, ast.Name):
            return False
        values = self._values_of(node)
        return bool(values) and all(self._is_nccl_constant(value) for value in values)

    def _is_nccl_constant(self, node: ast.AST) -> bool:
        value = string_value(node)
        if value is not None:
            return value.lower() in CUDA_BACKENDS
        return isinstance(node, ast.Attribute) and self.ctx.semantic.qualified_name(node) in CUDA_BACKEND_CONSTANTS

    def _option_defaulting_to_nccl(self, node: ast.AST) -> ast.Call | None:
        """``args.dist_backend`` whose command-line option defaults to "nccl": the
        ``parser.add_argument("--dist-backend", default="nccl")`` that says so."""
        if not isinstance(node, ast.Attribute):
            return None
        for call in self.ctx.semantic.calls:
            if method_name(call) != "add_argument":
                continue
            default = keyword(call, "default")
            if default is not None and self._is_nccl_constant(default.value) and _option_destination(call) == node.attr:
                return call
        return None

    def _check_ddp(self, call: ast.Call) -> None:
        """``DDP(model, device_ids=[local_rank], output_device=local_rank)``: CUDA device
        indices. DDP of a module on the XLA device needs none; given one, it moves every
        input to ``xla:<index>`` on a CUDA-style side stream, which raises for any index but
        the process's own device."""
        cuda = []
        for position, name in enumerate(DDP_DEVICE_KEYWORDS, start=1):
            value = argument(call, position, name)
            unset = value is None or (isinstance(value, ast.Constant) and value.value is None)
            if not unset and not self._names_xla_device(value):
                cuda.append((name, value))
        if not cuda:
            return
        name, value = cuda[0]
        message = (
            f"`{name}={self._short_source(value)}` names CUDA devices: DDP of a module on the XLA device "
            "takes none (torch_xla's guide: `DDP(model, gradient_as_bucket_view=True)`); given one, DDP moves "
            "each input to `xla:<index>`, which raises for any index but the process's own device"
        )
        if has_star_args(call) or any(keyword(call, n) is None for n, _ in cuda):
            self._report(value, message + " (no fix: passed by position, remove it by hand)", None)
            return
        # `device_ids=[torch_xla.device()]` keeps what the script relies on: DDP moves each
        # input to that device (this process's own: index 0). `torch.device("xla")`, all
        # a fix may write where it runs at import time, has no index, which DDP rejects.
        keep_ids = any(n == "device_ids" for n, _ in cuda) and not self._evaluated_at_import(call)
        device, imports = self._xla_device(call) if keep_ids else ("", ())
        operations = [
            ReplaceExpr(self.ctx.span(v), f"[{device}]")
            if n == "device_ids" and keep_ids
            else RemoveKeyword(self.ctx.span(call), n)
            for n, v in cuda
        ]
        what = " and ".join(
            f"`device_ids=[{device}]`" if n == "device_ids" and keep_ids else f"no `{n}`" for n, _ in cuda
        )
        after = (
            "; with this process's XLA device, DDP moves the inputs there as it moved them to the GPU"
            if keep_ids
            else "; without it the inputs stay where the script puts them (on the XLA device once ported)"
        )
        self._report(value, message + after, self.fix("safe", f"Use {what}", *operations, imports=imports))

    def _names_xla_device(self, node: ast.AST) -> bool:
        """``[torch_xla.device()]``, ``[xm.xla_device()]``, ``torch.device("xla")``, or a
        variable assigned one: a script already written for XLA."""

        def mentions_xla(expr: ast.AST) -> bool:
            for sub in ast.walk(expr):
                if isinstance(sub, ast.Call) and (self.ctx.semantic.call_name(sub) or "").startswith("torch_xla."):
                    return True
                if (string_value(sub) or "").startswith("xla"):
                    return True
            return False

        if mentions_xla(node):
            return True
        for name in (n for n in ast.walk(node) if isinstance(n, ast.Name)):
            if any(mentions_xla(value) for value in self._values_of(name)):
                return True
        return False

    def _check_share_memory(self, call: ast.Call) -> None:
        """``model.share_memory()`` (Hogwild): shared memory holds CPU tensors only, and the
        port puts the model on the XLA device. No fix: the training design has to change."""
        receiver = dotted_name(call.func.value)  # type: ignore[attr-defined]
        moved = self._moved_to_a_device(receiver) if receiver else None
        if moved is None:
            return  # a model that stays on the CPU can be shared
        message = (
            f"`{self._short_source(call)}`: line {moved.lineno} puts `{receiver}` on a device, the XLA device "
            "once ported, and XLA tensors cannot be shared between processes (`RuntimeError: _share_fd_: only "
            "available on CPU`): train with one process per XLA device (`torch_xla.launch`), each keeping its "
            "own copy in step through DDP or `xm.optimizer_step`, or keep this model on the CPU"
        )
        self._report(call, message, None)

    def _moved_to_a_device(self, target: str) -> ast.Call | None:
        """A ``<target>.to(<device>)`` / ``<target>.cuda()`` call, or ``<target> = <...>.to(<device>)``."""
        for call in self.ctx.semantic.calls:
            method = method_name(call)
            if method not in ("to", "cuda") or (method == "to" and not self._to_a_device(call)):
                continue
            holder = parent(call)
            assigned = (
                isinstance(holder, ast.Assign)
                and holder.value is call
                and any(dotted_name(t) == target for t in holder.targets)
            )
            if assigned or dotted_name(call.func.value) == target:  # type: ignore[attr-defined]
                return call
        return None

    def _to_a_device(self, call: ast.Call) -> bool:
        """``.to(device)``, not ``.to(torch.float16)`` nor ``.to("cpu")``."""
        value = argument(call, 0, "device")
        if value is None or (is_other_device_string(value) and not (string_value(value) or "").startswith("xla")):
            return False
        if isinstance(value, ast.Attribute):
            qualified = self.ctx.semantic.qualified_name(value)
            return qualified is None or not qualified.startswith("torch.")
        return True

    # -- reporting ----------------------------------------------------------------------------------
    def _report(self, node: ast.AST, message: str, fix: Fix | None, keep: ast.AST | None = None) -> None:
        """Report ``node`` unless a finding already covers it, and claim what is inside
        it (but ``keep``: the receiver of ``.cuda()`` may hold findings of its own)."""
        if id(node) in self._claimed:
            return
        kept = {id(n) for n in ast.walk(keep)} if keep is not None else set()
        self._claimed.update(id(n) for n in ast.walk(node) if id(n) not in kept)
        self.report(node, message, fix)


class ObjectRemoval:
    """A fix that removes an object the XLA port has no use for (a CUDA ``GradScaler``,
    stream or event) and rewrites every use of it.

    The object must be assigned, alone on its lines, to a variable (uses: that name in
    its scope) or to ``self.<attr>`` (uses: ``<self>.<attr>`` in that class); the variable
    may be assigned again when each assignment builds such an object (the PyTorch AMP
    recipe builds one scaler per section): they all go. Every use must be one that
    ``rewrite`` records an operation for, or there is no fix, and ``blocker`` says
    which line stands in the way.
    """

    def __init__(self, rule: CudaDevice, call: ast.Call):
        self.rule = rule
        self.ctx = rule.ctx
        self.call = call
        self.operations: list[Operation] = []
        self.imports: list[Import] = []
        self.blocker = "it is used in a way the fix cannot rewrite"
        # Why the use ``rewrite`` turned down cannot be rewritten (it may say more).
        self.refusal = "uses it in a way the fix cannot rewrite"
        # The statements that build the object: this one and any re-assignment.
        self.constructions: list[ast.stmt] = []

    def is_construction(self, value: ast.AST) -> bool:
        """``value`` builds another such object (a re-assignment that goes too)."""
        raise NotImplementedError

    def rewrite(self, use: ast.AST) -> bool:
        """Record the operations that remove ``use``; False if it cannot be removed
        (``refusal`` may then say why)."""
        raise NotImplementedError

    def _blocked(self, node: ast.AST, why: str) -> None:
        self.blocker = f"line {node.lineno} {why} (`{self.rule._short_source(node)}`)"  # type: ignore[attr-defined]

    def rewritten_uses(self) -> list[ast.AST] | None:
        """Find the object's uses and record their rewrites; None (``blocker`` set) when
        it is not assigned as it must be or a use cannot be rewritten."""
        stmt = parent(self.call)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is self.call:
            target = stmt.target
        else:
            self._blocked(stmt if isinstance(stmt, ast.stmt) else self.call, "does not assign it to a name")
            return None
        if not is_alone_on_its_lines(stmt):
            self._blocked(stmt, "shares its line with another statement")
            return None
        self.constructions = [stmt]
        uses = self._uses(target)
        if uses is None:
            return None
        for use in uses:
            if not self.rewrite(use):
                self._blocked(enclosing_statement(use) or use, self.refusal)
                return None
        return uses

    def remove_constructions(self) -> None:
        for construction in sorted(self.constructions, key=lambda n: n.lineno):
            self.operations.append(RemoveStatement(self.ctx.span(construction)))

    def _uses(self, target: ast.AST) -> list[ast.AST] | None:
        """Every other read of the object, or None (with ``blocker`` set) when it is
        assigned anything but another such object."""
        if isinstance(target, ast.Name):
            # The same variable: the same name in the same scope (a function's local
            # `scaler` is not another function's).
            scope = self.rule.scope_of(target)
            found = [
                n
                for n in self.ctx.semantic.nodes_of(ast.Name)
                if n.id == target.id and n is not target and self.rule.scope_of(n) is scope
            ]
            return self._reads(found)
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            cls = next((a for a in ancestors(target) if isinstance(a, ast.ClassDef)), None)
            if cls is None:
                self._blocked(target, "sets an attribute outside a class")
                return None
            # `self.stream` and `torch.cuda.stream` share a name, not a value: an attribute
            # of an imported module is not a use.
            everywhere = [
                n
                for n in self.ctx.semantic.nodes_of(ast.Attribute)
                if n.attr == target.attr and n is not target and self.ctx.semantic.qualified_name(n) is None
            ]
            inside = {id(n) for n in ast.walk(cls)}
            for n in everywhere:
                if id(n) not in inside or not self._is_self_attribute(n):
                    self._blocked(enclosing_statement(n) or n, f"reads `.{target.attr}` outside its class")
                    return None
            return self._reads(everywhere)
        self._blocked(target, "does not assign it to a name")
        return None

    def _reads(self, occurrences: list) -> list[ast.AST] | None:
        """The reads among ``occurrences``; a store is fine only as another construction."""
        reads = []
        for node in occurrences:
            if isinstance(node.ctx, ast.Load):
                reads.append(node)
                continue
            stmt = parent(node)
            if (
                isinstance(stmt, ast.Assign)
                and stmt.targets == [node]
                and self.is_construction(stmt.value)
                and is_alone_on_its_lines(stmt)
            ):
                self.constructions.append(stmt)
                continue
            self._blocked(enclosing_statement(node) or node, "assigns it something else")
            return None
        return reads

    @staticmethod
    def _is_self_attribute(node: ast.Attribute) -> bool:
        """``<first parameter of the enclosing method>.<attr>``."""
        func = next((a for a in ancestors(node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if func is None or not isinstance(node.value, ast.Name):
            return False
        params = [*func.args.posonlyargs, *func.args.args]
        return bool(params) and params[0].arg == node.value.id


class ScalerRemoval(ObjectRemoval):
    """The unsafe fix that removes a ``GradScaler`` and rewrites every use of it: each
    use must be one of the method calls of ``rewrite``."""

    def is_construction(self, value: ast.AST) -> bool:
        return self.rule.is_cuda_grad_scaler(value)

    def fix(self) -> Fix | None:
        uses = self.rewritten_uses()
        if uses is None:
            return None
        if not uses or not self._may_gain_an_unscale(uses):
            self.remove_constructions()
        return self.rule.fix(
            "unsafe",
            "Remove the GradScaler (bfloat16 needs no loss scaling)",
            *self.operations,
            unused_imports=self.rule._imported_name(self.call.func),
        )

    def _may_gain_an_unscale(self, uses: list[ast.AST]) -> bool:
        """A clip with no ``scaler.unscale_`` is what XLA106 fixes by inserting
        ``scaler.unscale_(opt)``, in the same pass as this fix (an insertion claims
        no span, so the fix loop cannot see the clash). Then the construction is kept
        for one more pass: the inserted call is a use the next pass removes, with
        the construction, instead of a dangling name."""
        methods = {parent(use).attr for use in uses}  # type: ignore[union-attr]
        if "unscale_" in methods:
            return False
        return any(
            isinstance(call.func, (ast.Name, ast.Attribute))
            and (call.func.id if isinstance(call.func, ast.Name) else call.func.attr) in CLIP_FUNCTIONS
            for call in self.ctx.semantic.calls
        )

    def rewrite(self, use: ast.AST) -> bool:
        """Record the operation that removes one use: ``scaler.<method>(...)``."""
        attribute = parent(use)
        call = parent(attribute)
        if not (isinstance(attribute, ast.Attribute) and isinstance(call, ast.Call) and call.func is attribute):
            return False
        method = attribute.attr
        span = self.ctx.span(call)
        if has_star_args(call):
            return False
        if method == "scale" and len(call.args) == 1 and not call.keywords:
            # scaler.scale(loss) -> loss (in parentheses where `.backward()` follows).
            needs_parens = not isinstance(call.args[0], ATOMIC) and isinstance(
                parent(call), (ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Await)
            )
            template = "({loss})" if needs_parens else "{loss}"
            self.operations.append(ReplaceExpr(span, template, (("loss", self.ctx.span(call.args[0])),)))
            return True
        if method == "step" and len(call.args) == 1 and not call.keywords:
            optimizer = call.args[0]
            template = "{opt}.step()" if isinstance(optimizer, ATOMIC) else "({opt}).step()"
            self.operations.append(ReplaceExpr(span, template, (("opt", self.ctx.span(optimizer)),)))
            return True
        if method in ("update", "unscale_", "load_state_dict"):
            stmt = whole_statement(call)
            if stmt is None:
                return False
            self.operations.append(RemoveStatement(self.ctx.span(stmt)))
            return True
        replacements = {"get_scale": "1.0", "state_dict": "{{}}", "is_enabled": "False"}
        if method in replacements and not call.args and not call.keywords:
            self.operations.append(ReplaceExpr(span, replacements[method]))
            return True
        return False


class StreamRemoval(ObjectRemoval):
    """The safe fix that removes a CUDA stream or event (``torch.cuda.Stream()``,
    ``torch.cuda.current_stream()``, ``torch.cuda.Event()``) with every use of it.

    An XLA process has one device and no user streams: the compiler orders the work.
    So a use goes when it only orders streams: the context of a ``with`` (``with
    torch.cuda.stream(s):`` keeps its body), a statement such as ``s.wait_stream(t)``,
    ``torch.cuda.current_stream().wait_stream(s)``, ``x.record_stream(s)``,
    ``e.record(s)`` or ``torch.cuda.set_stream(s)``; and waiting for a stream or an event
    (``s.synchronize()``) is waiting for the device, ``xm.wait_device_ops()``. A stream
    that is not assigned (``torch.cuda.current_stream().wait_stream(s)``) is its own only
    use. Any other use (``e.elapsed_time(f)``, ``s.query()``, passing it on) blocks the fix.
    """

    def is_construction(self, value: ast.AST) -> bool:
        api = self._api(value)
        return api is not None and api[1].action == "stream"

    def _api(self, node: ast.AST) -> tuple[str, CudaApi] | None:
        """The table's row for a ``torch.cuda``/``torch.accelerator`` call."""
        name = self.ctx.semantic.call_name(node) if isinstance(node, ast.Call) else None
        return lookup(name) if name else None

    def fix(self) -> Fix | None:
        if isinstance(parent(self.call), (ast.Assign, ast.AnnAssign)):
            if self.rewritten_uses() is None:
                return None
            self.remove_constructions()
        elif not self.rewrite(self.call):
            self._blocked(enclosing_statement(self.call) or self.call, self.refusal)
            return None
        return self.rule.fix(
            "safe", "Remove the CUDA stream or event and what uses it", *self.operations, imports=tuple(self.imports)
        )

    def rewrite(self, use: ast.AST) -> bool:
        holder = parent(use)
        if isinstance(holder, ast.Attribute) and holder.value is use:  # `s.wait_stream(t)`
            call = parent(holder)
            if not (isinstance(call, ast.Call) and call.func is holder):
                return False
            return self._rewrite_statement(call, holder.attr)
        if isinstance(holder, ast.keyword):
            holder = parent(holder)
        if not isinstance(holder, ast.Call) or holder.func is use:
            return False
        api = self._api(holder)
        if api is not None and api[1].action == "context":  # `with torch.cuda.stream(s):`
            unwrap, refusal = self.rule.unwrap(holder)
            if unwrap is None:
                self.refusal = f"uses it in a context the fix cannot drop: {refusal}"
                return False
            self.operations.append(unwrap)
            return True
        if api is not None and api[0] == "set_stream":
            return self._rewrite_statement(holder, "set_stream")
        method = method_name(holder)
        if method in STREAM_ORDERING_METHODS:  # `t.wait_stream(s)`, `x.record_stream(s)`
            return self._rewrite_statement(holder, method)
        return False

    def _rewrite_statement(self, call: ast.Call, method: str) -> bool:
        """Remove the statement that is nothing but ``call``, or make it wait for the device."""
        stmt = whole_statement(call)
        if stmt is None or method not in (*STREAM_ORDERING_METHODS, *STREAM_WAITING_METHODS, "set_stream"):
            return False
        if any(node is not call and self._api(node) is None for node in ast.walk(stmt) if isinstance(node, ast.Call)):
            self.refusal = "does more than order streams"  # `next(batches).record_stream(s)`
            return False
        if method in STREAM_WAITING_METHODS:
            code, imports = self.rule._spell("{xm}.wait_device_ops()", call)
            self.operations.append(ReplaceExpr(self.ctx.span(call), code))
            self.imports.extend(imports)
        else:
            self.operations.append(RemoveStatement(self.ctx.span(stmt)))
        return True


def _inspects_device_string(test: ast.expr) -> bool:
    """The condition looks at a CUDA string (``"cuda" in device``, ``device == "cuda"``,
    ``device.startswith("cuda")``): it classifies an existing device."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and any(is_cuda_string(n) for n in (node.left, *node.comparators)):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "startswith"
            and any(is_cuda_string(a) for a in node.args)
        ):
            return True
    return False


def _device_map_on_xla(node: ast.AST) -> str | None:
    """``"cpu:gloo,cuda:nccl"`` (a backend per device) as ``"cpu:gloo,xla:xla"``: the
    other devices keep their backends; None if it names no NCCL backend."""
    value = string_value(node)
    if value is None or ":" not in value:
        return None
    pairs = [part.strip().split(":", 1) for part in value.split(",")]
    if any(len(pair) != 2 for pair in pairs) or not any(b.strip().lower() in CUDA_BACKENDS for _, b in pairs):
        return None
    mapped = [f"{XLA_BACKEND}:{XLA_BACKEND}" if b.strip().lower() in CUDA_BACKENDS else f"{d}:{b}" for d, b in pairs]
    return '"' + ",".join(mapped) + '"'


def _option_destination(call: ast.Call) -> str | None:
    """The attribute ``parser.add_argument(...)`` sets: ``dest=``, else the first long
    option (``--dist-backend`` -> ``dist_backend``), else the first option or name."""
    dest = keyword(call, "dest")
    if dest is not None:
        return string_value(dest.value)
    names = [v for v in (string_value(a) for a in call.args) if v]
    chosen = next((n for n in names if n.startswith("--")), names[0] if names else None)
    return chosen.lstrip("-").replace("-", "_") if chosen else None
