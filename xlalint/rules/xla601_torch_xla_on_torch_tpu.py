"""XLA601 torch-xla-on-torch-tpu: torch_xla in a script ported to TorchTPU.

Runs only under ``target-runtime = "torch-tpu"``. TorchTPU is a PyTorch backend of its
own (a ``tpu`` device, eager by default): a script moving there from torch_xla keeps none
of torch_xla's device, sync, loader or launcher. Each torch_xla call is reported with its
TorchTPU counterpart, and rewritten where that is mechanical.
"""

from __future__ import annotations

import ast
import re

from xlalint.analysis.semantic import keyword, string_value
from xlalint.analysis.syntax import has_star_args, whole_statement
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import RemoveKeyword, RemoveStatement, ReplaceExpr, SetKeyword

_XM = "torch_xla.core.xla_model."
_XR = "torch_xla.runtime."

# torch_xla call -> (what to write, with `{torch}` and the call's `{arg0}`; or None: reported only),
# and the message. The counterparts are TorchTPU 0.2.0's (rules/data/torch_tpu_api.json).
DEVICE = 'torch.device("tpu")'
CALLS: dict[str, tuple[str | None, str]] = {
    "torch_xla.device": ('{torch}.device("tpu")', f"the XLA device: on TorchTPU `{DEVICE}`"),
    "torch_xla.torch_xla.device": ('{torch}.device("tpu")', f"the XLA device: on TorchTPU `{DEVICE}`"),
    _XM + "xla_device": ('{torch}.device("tpu")', f"the XLA device: on TorchTPU `{DEVICE}`"),
    _XM + "wait_device_ops": (
        "{torch}.accelerator.synchronize()",
        "waiting for the device: on TorchTPU `torch.accelerator.synchronize()`",
    ),
    "torch_xla.manual_seed": ("{torch}.tpu.manual_seed({arg0})", "on TorchTPU seed with `torch.tpu.manual_seed(s)`"),
    _XM + "set_rng_state": ("{torch}.tpu.manual_seed({arg0})", "on TorchTPU seed with `torch.tpu.manual_seed(s)`"),
    _XM + "save": (None, "`xm.save`: on TorchTPU `torch.save` (it materializes the tensors); save on one rank"),
    _XM + "master_print": (None, "`xm.master_print`: on TorchTPU print where `torch.distributed.get_rank() == 0`"),
    _XM + "is_master_ordinal": (None, "on TorchTPU the master is `torch.distributed.get_rank() == 0`"),
    _XM + "get_ordinal": (None, "on TorchTPU the rank is `torch.distributed.get_rank()`"),
    _XM + "xrt_world_size": (None, "on TorchTPU the world size is `torch.distributed.get_world_size()`"),
    _XR + "global_ordinal": (None, "on TorchTPU the rank is `torch.distributed.get_rank()`"),
    _XR + "world_size": (None, "on TorchTPU the world size is `torch.distributed.get_world_size()`"),
    _XM + "optimizer_step": (
        None,
        "`xm.optimizer_step` reduces torch_xla's gradients: on TorchTPU wrap the model in DDP and call `opt.step()`",
    ),
    _XM + "add_step_closure": (None, "TorchTPU has no step closures: read the values where the step has ended"),
    "torch_xla.distributed.parallel_loader.MpDeviceLoader": (
        None,
        "`MpDeviceLoader` is torch_xla's: on TorchTPU iterate the loader and move each batch with `.to(device)`",
    ),
    "torch_xla.distributed.xla_multiprocessing.spawn": (
        None,
        "`xmp.spawn` is torch_xla's launcher: on TorchTPU start the workers with torchrun",
    ),
    "torch_xla.launch": (
        None,
        "`torch_xla.launch` is torch_xla's launcher: on TorchTPU start the workers with torchrun",
    ),
    "torch_xla.compile": (None, "`torch_xla.compile` is torch_xla's: on TorchTPU use `torch.compile(...)`"),
    "torch_xla.step": (None, "`torch_xla.step()` is torch_xla's: TorchTPU needs no step context"),
}
# In a script of one process, what the multi-process helpers come to (their master is
# the process, their reduction over one replica is nothing).
SINGLE_PROCESS: dict[str, str] = {
    _XM + "optimizer_step": "{arg0}.step()",
    _XM + "master_print": "print({arg0})",
    _XM + "save": "{torch}.save({arg0}, {arg1})",
}
# A sync of torch_xla's lazy graph: TorchTPU dispatches each op as it comes.
SYNCS = frozenset({"torch_xla.sync", "torch_xla.torch_xla.sync", _XM + "mark_step"})
SYNC_MESSAGE = "TorchTPU runs ops as they come (its default eager mode): the XLA step sync goes"
INIT_PROCESS_GROUP = frozenset(
    {"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"}
)


class TorchXlaOnTorchTpu(Rule):
    code = "XLA601"
    name = "torch-xla-on-torch-tpu"
    summary = "torch_xla in a script ported to TorchTPU: use its TorchTPU counterpart"
    explanation = """
## Why

Under `target-runtime = "torch-tpu"` the script is meant to run on TorchTPU, Google's
PyTorch backend for TPUs (`torch-tpu`), not on torch_xla. TorchTPU adds a `tpu` device
and a `torch.tpu` module that mirrors `torch.cuda`, and runs ops eagerly by default: a
script that keeps torch_xla's device, sync, loaders or launcher still needs torch_xla,
and its XLA device is not TorchTPU's.

## What is flagged

Only under `target-runtime = "torch-tpu"`: calls of torch_xla (`torch_xla.device()`,
`xm.xla_device()`, `torch_xla.sync()`, `xm.mark_step()`, `xm.wait_device_ops()`,
`torch_xla.manual_seed()`, `xm.save`, `xm.optimizer_step`, `xm.add_step_closure`,
`pl.MpDeviceLoader`, `xmp.spawn`, `torch_xla.launch`, the rank and world-size queries),
`backend="openxla"` of `torch.compile`, the `"xla"` backend of `init_process_group`,
and an import of torch_xla that nothing uses any more.

## Fix

unsafe (nothing of TorchTPU has run on a TPU here):
- `torch_xla.device()` / `xm.xla_device()` -> `torch.device("tpu")`;
- a `torch_xla.sync()` / `xm.mark_step()` statement is removed;
- `xm.wait_device_ops()` -> `torch.accelerator.synchronize()`;
- `torch_xla.manual_seed(s)` -> `torch.tpu.manual_seed(s)`;
- `torch.compile(..., backend="openxla")` -> `backend="tpu"`;
- `init_process_group("xla", init_method="xla://")` -> `init_process_group("tpu_dist")`;
- an `import torch_xla...` statement whose names nothing uses is removed.
- in a script of one process: `xm.optimizer_step(opt)` -> `opt.step()`,
  `xm.master_print(x)` -> `print(x)`, `xm.save(obj, path)` -> `torch.save(obj, path)`.
The rest is reported with its counterpart: in a multi-process script `xm.save`
(`torch.save` on one rank) and `xm.optimizer_step` (DDP and `opt.step()`); step
closures, `MpDeviceLoader`, the launchers (torchrun), the rank queries
(`torch.distributed`).

## Example

```python
import torch
import torch_xla
device = torch_xla.device()
for x, y in loader:
    loss = model(x.to(device)).sum()
    loss.backward()
    opt.step()
    torch_xla.sync()
```
becomes
```python
import torch
device = torch.device("tpu")
for x, y in loader:
    loss = model(x.to(device)).sum()
    loss.backward()
    opt.step()
```
"""
    fix_availability = "sometimes"

    VALID = [
        Valid(
            """
            import torch
            device = torch.device("tpu")
            model = torch.compile(model, backend="tpu")
            torch.tpu.manual_seed(0)
            """
        ),
        # Another library's `device()`.
        Valid("import torch\nimport jax\nd = jax.device()\n"),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm
            device = torch_xla.device()
            torch_xla.manual_seed(0)
            for x, y in loader:
                loss = model(x.to(device)).sum()
                loss.backward()
                opt.step()
                torch_xla.sync()
            xm.wait_device_ops()
            """,
            unsafe_fixed="""
            import torch
            device = torch.device("tpu")
            torch.tpu.manual_seed(0)
            for x, y in loader:
                loss = model(x.to(device)).sum()
                loss.backward()
                opt.step()
            torch.accelerator.synchronize()
            """,
            count=4,
        ),
        Invalid(
            """
            import torch
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend
            dist.init_process_group("xla", init_method="xla://")
            model = torch.compile(model, backend="openxla")
            """,
            unsafe_fixed="""
            import torch
            import torch.distributed as dist
            dist.init_process_group("tpu_dist")
            model = torch.compile(model, backend="tpu")
            """,
            count=3,
        ),
        # Reported with the counterpart: no mechanical rewrite.
        Invalid(
            """
            import torch
            import torch_xla.distributed.parallel_loader as pl
            train = pl.MpDeviceLoader(loader, device)
            """,
            count=1,
        ),
    ]

    def visit_Call(self, node: ast.Call) -> None:
        name = self.ctx.semantic.call_name(node) or ""
        if name in SYNCS:
            statement = whole_statement(node)
            fix = None
            if statement is not None and not node.args and not node.keywords:
                fix = self.fix("unsafe", "Remove the sync", RemoveStatement(self.ctx.span(statement)))
            self.report(node, SYNC_MESSAGE, fix)
        elif name in CALLS:
            template, message = CALLS[name]
            if template is None and name in SINGLE_PROCESS and not self.ctx.parallelism.multiprocess:
                template = SINGLE_PROCESS[name]
            self.report(node, message, self._call_fix(node, template))
        elif name == "torch.compile":
            backend = keyword(node, "backend")
            if backend is not None and string_value(backend.value) == "openxla":
                operation = SetKeyword(self.ctx.span(node), "backend", '"tpu"')
                fix = self.fix("unsafe", 'Use `backend="tpu"`', operation)
                self.report(node, '`backend="openxla"` is torch_xla\'s: on TorchTPU `backend="tpu"`', fix)
        elif name in INIT_PROCESS_GROUP:
            self._process_group(node)

    def _call_fix(self, call: ast.Call, template: str | None):
        """The call rewritten as ``template``: ``{torch}`` as the file spells torch,
        ``{argN}`` the call's positional arguments (no keywords, no more arguments)."""
        if template is None or call.keywords or has_star_args(call):
            return None
        wanted = sum(f"{{arg{i}}}" in template for i in range(3))
        if len(call.args) != wanted:
            return None
        torch, imports = self.ctx.reference("torch", at=call)
        code = template.replace("{torch}", torch)
        parts = tuple((f"arg{i}", self.ctx.span(argument)) for i, argument in enumerate(call.args))
        fix_title = "Use `" + re.sub(r"\{arg\d\}", "...", code) + "`"
        return self.fix("unsafe", fix_title, ReplaceExpr(self.ctx.span(call), code, parts), imports=imports)

    def _process_group(self, call: ast.Call) -> None:
        given = call.args[0] if call.args else (keyword(call, "backend").value if keyword(call, "backend") else None)
        if string_value(given) != "xla":
            return
        quote = self.ctx.source_of(given)[0]
        operations = [ReplaceExpr(self.ctx.span(given), f"{quote}tpu_dist{quote}")]
        init_method = keyword(call, "init_method")
        if init_method is not None and string_value(init_method.value) == "xla://":
            operations.append(RemoveKeyword(self.ctx.span(call), "init_method"))
        fix = self.fix("unsafe", 'Use `"tpu_dist"`', *operations)
        self.report(given, 'the `"xla"` process group is torch_xla\'s: on TorchTPU `"tpu_dist"`', fix)

    def finish(self) -> None:
        """An ``import torch_xla...`` whose names nothing reads: what the fixes above leave."""
        read = {n.id for n in self.ctx.semantic.nodes_of(ast.Name) if isinstance(n.ctx, ast.Load)}
        for statement in self.ctx.semantic.nodes_of(ast.Import, ast.ImportFrom):
            modules = (
                [a.name for a in statement.names] if isinstance(statement, ast.Import) else [statement.module or ""]
            )
            if not modules or not all(m == "torch_xla" or m.startswith("torch_xla.") for m in modules):
                continue
            bound = [
                (a.asname or (a.name.split(".")[0] if isinstance(statement, ast.Import) else a.name))
                for a in statement.names
            ]
            if any(name in read for name in bound):
                continue
            # `import torch_xla.distributed.xla_backend` registers the "xla" backend: it
            # goes with a process group that names "xla" as a string (rewritten above),
            # not while one takes its backend from elsewhere.
            if "torch_xla.distributed.xla_backend" in modules and not self._xla_groups_rewritten():
                continue
            fix = self.fix("unsafe", "Remove the import", RemoveStatement(self.ctx.span(statement)))
            self.report(statement, "torch_xla is imported but no longer used: TorchTPU does not need it", fix)

    def _xla_groups_rewritten(self) -> bool:
        """Every process group of the file names its backend as a string, not "xla" by a variable."""
        for call in self.ctx.semantic.calls:
            if (self.ctx.semantic.call_name(call) or "") in INIT_PROCESS_GROUP:
                given = (
                    call.args[0]
                    if call.args
                    else (keyword(call, "backend").value if keyword(call, "backend") else None)
                )
                if string_value(given) is None:
                    return False
        return True
