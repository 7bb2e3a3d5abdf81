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
``xlalint/rules/_cuda_api.py``. This module is the rule as its documentation reads: what
it flags, why, its fixes and examples, and which part handles which call. The parts, one
concern each, are in ``xlalint/rules/xla104/``; the device facts they share (which
expression is a device, what a variable holds, the CUDA path, import time) are the
``ctx.devices`` analysis in ``xlalint/analysis/devices.py``.
"""

from __future__ import annotations

import ast

from xlalint.analysis.devices import TORCH_DEVICE
from xlalint.analysis.semantic import method_name, parent
from xlalint.analysis.step_apis import LOSS_SCALERS
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.rules._cuda_api import DISTRIBUTED_DATA_PARALLEL, INIT_PROCESS_GROUP, SHARE_MEMORY_METHODS, lookup
from xlalint.rules.xla104 import amp, availability, cuda_calls, device_args, process_groups, streams, tensor_types
from xlalint.rules.xla104.amp import GENERIC_AUTOCAST, GENERIC_GRAD_SCALER, Amp
from xlalint.rules.xla104.availability import Availability
from xlalint.rules.xla104.cuda_calls import CudaCalls
from xlalint.rules.xla104.device_args import DeviceArguments
from xlalint.rules.xla104.process_groups import ProcessGroups
from xlalint.rules.xla104.streams import Streams
from xlalint.rules.xla104.tensor_types import TensorTypes
from xlalint.rules.xla104.torch_tpu import TorchTpuPort
from xlalint.rules.xla104.writer import Writer

# Methods checked on any receiver but torch's own modules: `.cuda()`, `.share_memory()`.
METHODS_CHECKED = frozenset({"cuda", *SHARE_MEMORY_METHODS})
# timm's `NativeScaler` builds a CUDA `GradScaler` and drives the step through it.
LOSS_SCALER_MESSAGE = "timm `NativeScaler` holds a CUDA `GradScaler`: bfloat16 on XLA needs no loss scaling"


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
- a command-line option whose default is a CUDA device: `parser.add_argument("--device",
  default="cuda" if torch.cuda.is_available() else "cpu")`, or `default="cuda:0"` when the
  script gives `args.device` as a device or as autocast's `device_type`;
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
- `torch.Generator(device=...)` on CUDA or on the XLA device: a generator on an XLA
  device raises ("XLA device type not an accelerator"); the unsafe fix keeps it on the
  CPU (`device="cpu"`), as torch_xla's own samplers do;
- `torch.accelerator.current_accelerator()` (on a torch_xla machine it is not the XLA
  device) and the rest of `torch.accelerator`;
- `torch.cuda.is_available()` / `torch.accelerator.is_available()` where it chooses the
  device: in the test of an `if` (or a conditional expression) whose branches set or
  use a device, or in a flag that such a test reads (`use_cuda = not args.no_cuda and
  torch.cuda.is_available()` ... `if use_cuda:`; `args.cuda = ...` too). On an XLA
  machine it is False, so the ported script would run on the CPU. Anywhere else too
  (issue 21): `assert torch.cuda.is_available()`, `if torch.cuda.is_available():
  torch.cuda.manual_seed(s)`, `pin = torch.cuda.is_available()`: the ported script would
  stop, or skip what it does on an accelerator (not in an `if` whose branches only
  print, warn or log, or build the text of a log line: nothing runs differently, and a
  test that adds `{memory}` to a format is tied to the one that fills it). `"bfloat16" if torch.cuda.is_available()
  and torch.cuda.is_bf16_supported() else "float16"` is reported once, as a whole: it
  would pick float16 on XLA (and the scaler the fix removes would be its loss scaling);
- a data-parallel script's CUDA parts (names in `xlalint/rules/_cuda_api.py`):
  `dist.init_process_group` with the `"nccl"` backend (`backend="nccl"`, positional
  `"nccl"`, `dist.Backend.NCCL`, a variable assigned one, a backend per device such as
  `"cpu:gloo,cuda:nccl"`, `"nccl" if torch.cuda.is_available() else "gloo"`,
  `args.dist_backend` whose `add_argument` default is `"nccl"`, and a parameter whose
  default is `"nccl"`: `def setup(rank, world_size, backend="nccl")`); `device_ids=` and
  `output_device=` of `DistributedDataParallel` (unless they name the XLA device); and
  `model.share_memory()` / `t.share_memory_()` on something the script moves to a device
  (Hogwild training with `torch.multiprocessing`);
- every other `torch.cuda.*` call, from one table (`xlalint/rules/_cuda_api.py`): the
  memory API (`memory_allocated`, `max_memory_allocated`, `reset_peak_memory_stats`,
  ...), streams and device contexts (`torch.cuda.Stream()`, `torch.cuda.stream(s)`,
  `torch.cuda.current_stream()`, `torch.cuda.device(i)`, `torch.accelerator.device_index(i)`),
  events, graphs, NVTX, RNG state. Each is fixed, or reported with its XLA
  replacement, or with "no XLA counterpart";
- the CUDA tensor types (`torch.cuda.FloatTensor`, `LongTensor`, `HalfTensor`,
  `ByteTensor`, `DoubleTensor`, `IntTensor`, `BoolTensor`, ...) called as constructors,
  given to `.type(T)`, or chosen by a test (`Tensor = torch.cuda.FloatTensor if cuda else
  torch.FloatTensor`, the GAN scripts' way): without CUDA each raises "Found no NVIDIA
  driver".

## What is not flagged

An availability test whose branches only set a device that a later unconditional
assignment in the same block decides (`if torch.cuda.is_available(): device =
torch.device("cuda")` then `device = xm.xla_device()`: the CUDA device is still ported);
a `"cuda"` string that is not a device
(`print("cuda")`, a dict key); a device in a variable (`x.to(device)`);
`torch.device("cpu")`, `.to("xla")`; CUDA mentioned in comments or strings; files
outside the scope (no torch/torch_xla/transformers/tokenizers/accelerate import).

## The fix

Safe:
- a device expression becomes `torch_xla.device()`: `torch.device("cuda")` ->
  `torch_xla.device()`, `.to("cuda")` -> `.to(torch_xla.device())`, `device="cuda"` ->
  `device=torch_xla.device()`, the whole selection idiom -> `torch_xla.device()`;
  `device.type == "cuda"` of such a `device` tests `"xla"`, as below.
  Where the XLA device is already in a variable in scope, the fix writes that variable
  instead: one the function (or module) assigns the XLA device in its own body above
  (`device = torch_xla.device()`, or a CUDA device the port makes it), never anything
  else, and not a parameter or loop target; the module's such variable read in a
  function defined after it (not in a script that spawns workers); a parameter
  (`def evaluate(model, loader, device)`) that every call in the module passes such a
  variable; `self.<attr>` that `__init__` makes the device and nothing else rebinds;
- `.cuda()` -> `.to(torch_xla.device())`; the CUDA device index of `.cuda(0)` is
  dropped, `non_blocking=` and `memory_format=` are kept;
- `torch.cuda.synchronize()` -> `torch_xla.sync()` then `xm.wait_device_ops()`: the
  wait alone runs nothing, the lazy graph is still pending, so a timing block
  (`synchronize(); t1 = time.time()`) would measure the tracing, not the step. Only the
  wait where a sync directly precedes; no fix in a one-line block (`if x: ...`), where
  the sync has no place;
- `torch.cuda.manual_seed(s)` / `manual_seed_all(s)` -> `torch_xla.manual_seed(s)`
  (`xm.set_rng_state(s)` before 2.4). Under `if torch.cuda.is_available():` (or a flag
  built on it), which is False on XLA, the seed goes before the test, where it runs; the
  test goes with it when its body was nothing but seeds;
- a CUDA tensor type called or given to `.type()`: `torch.cuda.FloatTensor(x)` ->
  `torch.FloatTensor(x).to(torch_xla.device())`, `t.type(torch.cuda.LongTensor)` ->
  `t.to(torch_xla.device(), torch.int64)`; a name for one (`Tensor =
  torch.cuda.FloatTensor`) becomes the CPU type, with each `Tensor(...)` moved to the
  device and each `t.type(Tensor)` made `t.to(device, dtype)` (no fix when a use is
  anything else);
- `torch.cuda.empty_cache()` and `torch.cuda.set_device(...)` statements are removed
  (no fix when the call is part of a larger expression);
- `map_location=<cuda>` -> `map_location="cpu"`: load on the host, then move the
  model to the XLA device;
- `torch.accelerator.current_accelerator()` -> `torch_xla.device()` (not where its value
  is formatted into a string, `torch.device(f"{acc}:{rank}")`: it is a device type
  there, and `xla:0:0` is no device),
  `torch.accelerator.synchronize()` -> `torch_xla.sync()` then `xm.wait_device_ops()`,
  `torch.cuda.is_bf16_supported()` -> `True`; `reset_peak_memory_stats()` and the other
  statistics resets are removed (they return nothing, and raise without CUDA);
- a device that is also read as a string (`device = "cuda"`, or the selection
  `"cuda" if torch.cuda.is_available() else "cpu"`, with `"cuda" in device`,
  `device.startswith("cuda")`, or autocast's `device_type=device`) becomes `"xla"`, which
  is both a device (`.to("xla")`, `torch.device("xla")`) and a string. A device type
  derived from it (`device_type = "cuda" if "cuda" in device else "cpu"`) follows in the
  same fix (`"xla" if "xla" in device else "cpu"`): left alone it would say `"cpu"`, and
  `torch.autocast(device_type=device_type)` would silently autocast on the CPU (XLA
  tensors stay float32 there). Tests of either against a CUDA string (`device_type ==
  "cuda"`, `!=`, `in`, `.startswith`, `case "cuda":`) test `"xla"`: a branch taken on
  CUDA is taken on XLA, its CUDA calls ported (a branch left empty goes). `device_type ==
  "cpu"` stays, and so does a test that leads to what needs CUDA (`x.pin_memory()`,
  `AdamW(fused=...)`): false on XLA, the other branch runs. Never half a selection;
- a command-line option's default (`default="cuda" if torch.cuda.is_available() else
  "cpu"`, `default="cuda:0"`) becomes `"xla"`: the script reads `args.device` as the
  command line gives it, a string (`args.device.startswith("cuda")`), and the default is
  evaluated at import time, where `torch_xla.device()` would create the runtime before
  any worker is spawned ("Runtime is already initialized"). A device type derived from
  `args.device` (or from a variable that copies it) follows, `choices=["cuda", "cpu"]`
  gets `"xla"`, and `map_location=args.device` loads onto the CPU (`"cpu"`);
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
  `s.synchronize()` -> `torch_xla.sync()` then `xm.wait_device_ops()`; such a statement on
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
  `"cpu:gloo,xla:xla"`. A backend the script makes a setting stays one, now `"xla"`
  where it is defined, and the call keeps the user's variable: a `backend = "nccl"`
  variable (a configurator may override it) where it is assigned, a parameter's default
  (`def setup(rank, world_size, backend="nccl")` -> `backend="xla"`, with a caller's own
  `"nccl"`; no fix when a caller passes another value), a command-line option's default
  (`add_argument("--backend", default="nccl")` -> `default="xla"`, and `"xla"` joins its
  `choices`);
- `DDP(model, device_ids=[local_rank], output_device=local_rank)` ->
  `DDP(model, device_ids=[torch_xla.device()])`. The indices are CUDA devices. torch 2.9's
  DDP keeps them for a module on one non-CPU device and moves every input to
  `torch.device("xla", device_ids[0])` on a CUDA-style side stream, which raises
  (`'NoneType' object does not support the context manager protocol`) for every index but
  the process's own device: in every process but the first. torch_xla's guide passes none
  (`DDP(model, gradient_as_bucket_view=True)`); this process's XLA device (index 0) keeps
  what the script relies on: DDP moves the inputs there, as it moved them to the GPU. It
  is written as the variable that holds the XLA device above (`device =
  torch.device("cuda", local_rank)`, which the port makes `torch_xla.device()`), else
  `torch_xla.device()`, never a variable the port makes `"xla"` (whose index is None). Where the call runs at import time in a script that spawns workers,
  `device_ids` is removed instead (the device cannot be evaluated there, and
  `torch.device("xla")` has no index): DDP then leaves the inputs where the script puts
  them. Indices passed by position have no fix.

- in an XLA script, `local_rank = int(os.environ["LOCAL_RANK"])` (or `os.environ.get`,
  `os.getenv`) that nothing reads: torchrun's index of the CUDA device, left over once the
  port has replaced its uses. The statement only reads the environment, and is removed
  (in a function, or at module level of a script with a `__main__` block; a name read
  anywhere, or in a scope that calls `locals()`/`eval`, stays).

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
- a flag or test built on `is_available()` that chooses the device: the test is
  rewritten with its value on XLA, never as `if True:`: the call goes from `... and
  torch.cuda.is_available()` (`--no-cuda`-style options keep working), `not
  torch.cuda.is_available() or x` -> `x`, `if torch.cuda.is_available(): A else: B` ->
  `A` in place of the `if` (`B` for `if not ...`), `a if torch.cuda.is_available() else
  b` -> `a`, a flag's value -> `True`. So every path puts the model on the XLA device.
  A flag is ported at its definition only with every use: a tensor type it chooses
  (`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`) becomes the CPU type
  in the same fix, and each `Tensor(...)` is moved to the device, each `t.type(Tensor)`
  becomes `t.to(device, dtype)` (not when the flag stays a choice, `not args.no_cuda and
  ...`, or `Tensor` is used any other way: then no fix, the line named). Until this fix is
  applied the port runs on the CPU, and `check`/`fix` say so in a note after the summary;
- `torch.cuda.current_device()` -> `xr.local_ordinal()` (the index of this process's
  XLA device);
- `torch.cuda.is_available()` anywhere else: treated as True in the same way, so what
  the script does on an accelerator runs on XLA (an `assert` of it alone is removed; the
  bfloat16 condition becomes its `"bfloat16"` branch);

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
- an availability test (or a flag built on it) that guards code with no XLA port: a
  memory query, `torch.cuda.get_device_properties(...)`, `x.pin_memory()` or
  `AdamW(..., fused=True)` in a branch, or after
  `if not torch.cuda.is_available() or not flash: return`. Made True, that code would run
  on XLA (and raise, or print a number the device never gave): the test keeps guarding
  it, and the message names the line to port first;
- a memory query (`torch.cuda.max_memory_allocated()`, `memory_allocated()`, ...): it is
  reported with its XLA counterpart, `xm.get_memory_info(device)` (`["bytes_used"]`,
  `["bytes_limit"]`), which a TPU answers and the CPU runtime does not (it raises
  `GetAllocatorStats is not supported`). No number is written in its place: without CUDA
  the query returns 0, and a log of it (`mem 0MiB`) would report a value the device
  never gave;
- a `torch.cuda.Event` used to time the step (`elapsed_time`): time with
  `time.perf_counter()` after `torch_xla.sync()` and `xm.wait_device_ops()`, or read
  `torch_xla.debug.metrics`; `with torch.cuda.graph(g):` (run the body where the graph is
  replayed: XLA compiles and caches graphs itself); `set_per_process_memory_fraction`
  (on TPU the runtime owns the memory: remove it);
- `model.share_memory()` on a model the script moves to a device: once ported that is the
  XLA device, and XLA tensors cannot be shared between processes (`RuntimeError:
  _share_fd_: only available on CPU`). Train with one process per XLA device
  (`torch_xla.launch`), each keeping its own copy in step (DDP, `xm.optimizer_step`), or
  keep the shared model on the CPU.

The fixes add `import torch_xla` / `import torch_xla.core.xla_model as xm` as needed.

Under `target-runtime = "torch-tpu"` the port writes TorchTPU code instead, every fix
unsafe: TorchTPU mirrors CUDA, so each `"cuda"`/`"cuda:N"` device string of the file
becomes `"tpu"`/`"tpu:N"` (devices and the tests of them alike; a printed string stays),
`x.cuda()` -> `x.to("tpu")`, `torch.cuda.*` -> its TorchTPU 0.2.0 name (the device
queries TorchTPU makes internal, such as `is_available()`, go to `torch.accelerator`;
seeds to `torch.tpu.manual_seed`), CUDA autocast -> `torch.amp.autocast("tpu",
dtype=torch.bfloat16)` with the scaler removed, `"nccl"` -> `"tpu_dist"`, and DDP's
`device_ids` go. What has no TorchTPU counterpart (the memory statistics, tensor types)
is reported.

## Example

```python
import torch

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
import torch
import torch_xla

device = torch_xla.device()
model = Net().to(device)
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
        *device_args.VALID,
        *process_groups.VALID,
        *tensor_types.VALID,
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
            other = device
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
            other = device
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
        *device_args.INVALID,
        *availability.INVALID,
        *tensor_types.INVALID,
        *cuda_calls.INVALID,
        *amp.INVALID,
        *streams.INVALID,
        *process_groups.INVALID,
    ]

    # -- the walk: each call goes to the part that knows it ----------------------------------
    def begin(self) -> None:
        self.writer = Writer(self)
        # Porting to TorchTPU is a renaming of its own (rules/xla104/torch_tpu.py).
        self.torch_tpu = TorchTpuPort(self, self.writer) if self.ctx.on_torch_tpu else None
        self.device_args = DeviceArguments(self.writer)
        self.tensor_types = TensorTypes(self.writer)
        self.availability = Availability(self.writer, self.tensor_types)
        self.amp = Amp(self.writer)
        self.streams = Streams(self.writer)
        self.process_groups = ProcessGroups(self.writer)
        self.cuda_calls = CudaCalls(self.writer, self.availability, self.amp, self.streams)

    def finish(self) -> None:
        if self.torch_tpu is not None:
            self.torch_tpu.finish()
            return
        # Judged once every assignment and use has been seen.
        self.device_args.check_variables()
        self.availability.check()
        self.amp.check_autocast_by_variable()
        self.process_groups.check_unused_local_rank()

    def visit_Call(self, node: ast.Call) -> None:
        if self.torch_tpu is not None:
            self.torch_tpu.check_call(node)
            return
        name = self.ctx.semantic.call_name(node)
        row = lookup(name) if name else None
        if name in TORCH_DEVICE:
            self.device_args.check_torch_device(node)
        elif name in GENERIC_AUTOCAST:
            self.amp.check_autocast(node, name)
        elif name in GENERIC_GRAD_SCALER:
            self.amp.check_grad_scaler(node, name)
        elif name in LOSS_SCALERS:
            # No fix: the call of it runs the backward, the clip and the step too.
            self.writer.report(node, LOSS_SCALER_MESSAGE, None)
        elif name in INIT_PROCESS_GROUP:
            self.process_groups.check_process_group(node)
        elif name in DISTRIBUTED_DATA_PARALLEL:
            self.process_groups.check_ddp(node)
        elif row is not None:
            self.cuda_calls.check(node, name, *row)
        elif (method := method_name(node)) in METHODS_CHECKED and not (name or "").startswith("torch."):
            if method == "cuda":
                self.device_args.check_cuda_method(node)
            else:
                self.process_groups.check_share_memory(node)
        self.device_args.check_arguments(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # A CUDA tensor type not called (a call is the table's): `.type(T)`, `T if cuda else ...`.
        if node.attr.endswith("Tensor") and self.torch_tpu is None:
            holder = parent(node)
            if not (isinstance(holder, ast.Call) and holder.func is node):
                self.tensor_types.check_reference(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        if self.torch_tpu is not None:
            return
        self.device_args.check_selection(node)
        self.availability.check_conditional(node)

    def visit_arguments(self, node: ast.arguments) -> None:
        if self.torch_tpu is not None:
            return
        self.device_args.check_defaults(node)
