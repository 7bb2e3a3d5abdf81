"""XLA104 when the port targets TorchTPU (``target-runtime = "torch-tpu"``).

TorchTPU mirrors CUDA: a ``tpu`` device type, ``torch.tpu`` for ``torch.cuda``, eager
execution by default. So the port is a renaming that keeps every test of the same fact
together, not torch_xla's port (one XLA device, no availability test, a sync per step):
- the device type: each ``"cuda"``/``"cuda:N"`` string of the file becomes
  ``"tpu"``/``"tpu:N"``, a device, a ``device.type == "cuda"`` test and a
  ``--device`` option's default and choices alike (a string only printed stays);
- ``x.cuda()`` -> ``x.to("tpu")`` (``.cuda(1)`` -> ``.to("tpu:1")``, keywords kept);
- ``torch.cuda.*`` -> its TorchTPU name (``xlalint/rules/_torch_tpu_api.py``):
  ``torch.accelerator.is_available()`` and the other device queries that TorchTPU 0.2.0
  makes internal, ``torch.tpu.manual_seed(s)``; what has no counterpart is reported;
- ``torch.cuda.amp.autocast(...)`` -> ``torch.amp.autocast("tpu", ...)``;
- ``init_process_group("nccl")`` -> ``"tpu_dist"``; DDP's ``device_ids``/``output_device``
  go (the guide: each process sees its core as ``tpu:0``, DDP takes no device ids).
Every such fix is unsafe until it has run on a TPU (``engine/lint.py``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from xlalint.analysis.devices import CUDA_STRING, is_cuda_string
from xlalint.analysis.semantic import method_name, parent, string_value
from xlalint.analysis.syntax import argument, has_star_args, whole_statement
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import RemoveKeyword, RemoveStatement, ReplaceExpr, Span
from xlalint.rules._cuda_api import DDP_DEVICE_KEYWORDS, DISTRIBUTED_DATA_PARALLEL, INIT_PROCESS_GROUP
from xlalint.rules._torch_tpu_api import CUDA_AUTOCAST, CUDA_GRAD_SCALER, DEVICE_TYPE, DISTRIBUTED_BACKEND, lookup
from xlalint.rules.xla104.amp import GENERIC_AUTOCAST, GENERIC_GRAD_SCALER, ScalerRemoval
from xlalint.rules.xla104.writer import Writer

if TYPE_CHECKING:
    from xlalint.engine.rule import Rule

# Calls whose string arguments are text, not a device: "cuda" there stays.
_TEXT_CALLS = ("print", "warn", "debug", "info", "warning", "error", "exception", "critical", "log", "write")


class TorchTpuPort:
    def __init__(self, rule: Rule, writer: Writer):
        self.rule = rule
        self.ctx = rule.ctx
        self.writer = writer  # the scaler's removal is torch_xla's port's own
        # String constants whose finding is made by a call's own (a scaler's "cuda").
        self.claimed: set[int] = set()

    # -- calls -------------------------------------------------------------------------
    def check_call(self, call: ast.Call) -> None:
        name = self.ctx.semantic.call_name(call) or ""
        if name in CUDA_AUTOCAST or name in GENERIC_AUTOCAST:
            self._autocast(call, name)
        elif name in GENERIC_GRAD_SCALER or name in CUDA_GRAD_SCALER:
            self._grad_scaler(call, name)
        elif (found := lookup(name)) is not None and not found[0].endswith("Tensor"):  # types: in `finish`
            self._cuda_call(call, *found)
        elif name in INIT_PROCESS_GROUP:
            self._backend(call)
        elif name in DISTRIBUTED_DATA_PARALLEL:
            self._ddp(call)
        elif method_name(call) == "cuda" and not name.startswith("torch."):
            self._cuda_method(call)

    def _cuda_call(self, call: ast.Call, short: str, row) -> None:
        message = row.message.replace("{name}", short)
        fix = None
        if row.action == "rename" and row.target:
            torch, imports = self.ctx.reference("torch")
            code = torch + row.target[len("torch") :]
            fix = self.rule.fix(
                "unsafe", f"Use `{row.target}`", ReplaceExpr(self.ctx.span(call.func), code), imports=imports
            )
        elif row.action == "remove" and (statement := whole_statement(call)) is not None:
            fix = self.rule.fix(
                "unsafe", f"Remove `torch.cuda.{short}(...)`", RemoveStatement(self.ctx.span(statement))
            )
        self.rule.report(call, message, fix)

    def _autocast(self, call: ast.Call, name: str) -> None:
        """CUDA autocast -> ``torch.amp.autocast("tpu", dtype=torch.bfloat16)``, keeping
        ``enabled=`` and ``cache_enabled=``: TPUs compute in bfloat16, which needs no loss
        scaling, so the fix goes with the scaler's removal (as torch_xla's port does)."""
        generic = name in GENERIC_AUTOCAST
        if generic:
            device = (
                call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "device_type"), None)
            )
            if not is_cuda_string(device):
                return
            self.claimed.add(id(device))
        positional = call.args[1:] if generic else call.args
        message = 'CUDA autocast: on TorchTPU `torch.amp.autocast("tpu", dtype=torch.bfloat16)`'
        fix = None
        if not positional and not has_star_args(call):
            torch, imports = self.ctx.reference("torch")
            kept = [k for k in call.keywords if k.arg in ("enabled", "cache_enabled")]
            arguments, parts = self._keywords(kept)
            code = f'{torch}.amp.autocast("{DEVICE_TYPE}", dtype={torch}.bfloat16{arguments})'
            operation = ReplaceExpr(self.ctx.span(call), code, parts)
            fix = self.rule.fix(
                "unsafe", 'Use `torch.amp.autocast("tpu", dtype=torch.bfloat16)`', operation, imports=imports
            )
        self.rule.report(call, message, fix)

    def _grad_scaler(self, call: ast.Call, name: str) -> None:
        if name in GENERIC_GRAD_SCALER:
            device = argument(call, 0, "device")
            if device is not None and not is_cuda_string(device):
                return
            if device is not None:
                self.claimed.add(id(device))
        removal = ScalerRemoval(self.writer, call)
        fix = removal.fix()
        message = "CUDA `GradScaler`: TorchTPU's bfloat16 autocast needs no loss scaling"
        if fix is None:
            message += f" (no fix: {removal.blocker})"
        self.rule.report(call, message, fix)

    def _backend(self, call: ast.Call) -> None:
        given = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "backend"), None)
        if string_value(given) == "nccl":
            quote = self.ctx.source_of(given)[0]
            fix = self.rule.fix(
                "unsafe",
                f'Use `"{DISTRIBUTED_BACKEND}"`',
                ReplaceExpr(self.ctx.span(given), f"{quote}{DISTRIBUTED_BACKEND}{quote}"),
            )
            self.rule.report(given, f'NCCL is CUDA\'s collective backend: on TorchTPU `"{DISTRIBUTED_BACKEND}"`', fix)

    def _ddp(self, call: ast.Call) -> None:
        given = [k.arg for k in call.keywords if k.arg in DDP_DEVICE_KEYWORDS]
        if not given:
            return
        for keyword in call.keywords:
            if keyword.arg in DDP_DEVICE_KEYWORDS:
                self.claimed.update(id(n) for n in ast.walk(keyword.value))
        operations = [RemoveKeyword(self.ctx.span(call), name) for name in given]
        fix = self.rule.fix("unsafe", f"Remove `{'`, `'.join(given)}`", *operations)
        self.rule.report(call, "DDP's `device_ids` are CUDA devices: on TorchTPU each process has one, pass none", fix)

    def _cuda_method(self, call: ast.Call) -> None:
        receiver = call.func.value  # type: ignore[attr-defined]
        message = f'`.cuda()` moves to a CUDA device: on TorchTPU `.to("{DEVICE_TYPE}")`'
        device = f'"{DEVICE_TYPE}"'
        arguments = list(call.args)
        if arguments and isinstance(arguments[0], ast.Constant) and type(arguments[0].value) is int:
            device = f'"{DEVICE_TYPE}:{arguments.pop(0).value}"'
        fix = None
        if not arguments and not has_star_args(call):
            keywords, parts = self._keywords(call.keywords)
            parts = (("receiver", self.ctx.span(receiver)), *parts)
            code = f"{{receiver}}.to({device}{keywords})"
            fix = self.rule.fix("unsafe", f"Use `.to({device})`", ReplaceExpr(self.ctx.span(call), code, parts))
        self.rule.report(call, message, fix)

    # -- the device type in strings ------------------------------------------------------
    def finish(self) -> None:
        self._tensor_types()
        self._formatted_devices()
        for node in self.ctx.semantic.nodes_of(ast.Constant):
            if id(node) in self.claimed or not isinstance(node.value, str):
                continue
            match = CUDA_STRING.fullmatch(node.value)
            if match is None or self._is_text(node):
                continue
            quote = self.ctx.source_of(node)[0]
            if quote not in "\"'":  # a prefixed or implicitly concatenated string: by hand
                continue
            tpu = DEVICE_TYPE + (match[1] or "")
            fix = self.rule.fix("unsafe", f'Use `"{tpu}"`', ReplaceExpr(self.ctx.span(node), f"{quote}{tpu}{quote}"))
            self.rule.report(node, f'`"{node.value}"` is the CUDA device type: on TorchTPU `"{tpu}"`', fix)

    def _tensor_types(self) -> None:
        """``torch.cuda.FloatTensor`` and the other CUDA tensor types, called or not
        (``T = torch.cuda.FloatTensor if cuda else torch.FloatTensor``): no TorchTPU type."""
        for node in self.ctx.semantic.nodes_of(ast.Attribute):
            name = self.ctx.semantic.qualified_name(node) or ""
            found = lookup(name)
            if found is not None and found[0].endswith("Tensor") and not isinstance(parent(node), ast.Attribute):
                self.rule.report(node, found[1].message.replace("{name}", found[0]), None)

    def _formatted_devices(self) -> None:
        """``f"cuda:{rank}"`` -> ``f"tpu:{rank}"``: a device with its index formatted in."""
        for node in self.ctx.semantic.nodes_of(ast.JoinedStr):
            first = node.values[0] if node.values else None
            if not (isinstance(first, ast.Constant) and first.value == "cuda:" and len(node.values) > 1):
                continue
            if self._is_text(node):
                continue
            text = self.ctx.source_of(node)
            start = text.find("cuda:")
            if start < 0 or not text[:start].lower().lstrip("rb").startswith("f"):
                continue
            fix = self.rule.fix(
                "unsafe", "Use `tpu:`", ReplaceExpr(self.ctx.span(node), text[:start] + "tpu:" + text[start + 5 :])
            )
            self.rule.report(node, f'`"cuda:..."` is a CUDA device: on TorchTPU `"{DEVICE_TYPE}:..."`', fix)

    def _is_text(self, node: ast.Constant | ast.JoinedStr) -> bool:
        """A string only printed or logged, a docstring, or part of an f-string."""
        holder = parent(node)
        if isinstance(holder, (ast.JoinedStr, ast.Expr)):
            return True
        if isinstance(holder, ast.keyword):
            holder = parent(holder)
        if isinstance(holder, ast.Call):
            callee = holder.func.attr if isinstance(holder.func, ast.Attribute) else getattr(holder.func, "id", "")
            return callee in _TEXT_CALLS
        return False

    def _keywords(self, keywords: list[ast.keyword]) -> tuple[str, tuple[tuple[str, Span], ...]]:
        """``, name={kw0}, ...`` and the parts that keep each keyword's value as written."""
        text = "".join(f", {k.arg}={{kw{i}}}" for i, k in enumerate(keywords))
        return text, tuple((f"kw{i}", self.ctx.span(k.value)) for i, k in enumerate(keywords))


# XLA104's examples under `target-runtime = "torch-tpu"` (tests/test_torch_tpu.py runs them).
TORCH_TPU_VALID = [
    Valid(
        """
        import torch
        print("cuda")
        device = torch.device("tpu")
        x = torch.ones(2).to(device)
        ok = torch.accelerator.is_available()
        """
    ),
]
TORCH_TPU_INVALID = [
    Invalid(
        """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.cuda.manual_seed(0)
        model = Net().cuda()
        x = batch.cuda(non_blocking=True)
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):
            y = model(x)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        """,
        unsafe_fixed="""
        import torch
        device = torch.device("tpu" if torch.accelerator.is_available() else "cpu")
        torch.tpu.manual_seed(0)
        model = Net().to("tpu")
        x = batch.to("tpu", non_blocking=True)
        with torch.amp.autocast("tpu", dtype=torch.bfloat16):
            y = model(x)
        torch.accelerator.synchronize()
        """,
        count=8,
    ),
    Invalid(
        """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("nccl")
        model = DDP(model, device_ids=[rank], output_device=rank)
        if args.device == "cuda:0":
            print("cuda:0 picked")
        device = f"cuda:{local_rank}"
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        """,
        unsafe_fixed="""
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("tpu_dist")
        model = DDP(model)
        if args.device == "tpu:0":
            print("cuda:0 picked")
        device = f"tpu:{local_rank}"
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        """,
        count=5,
    ),
]
