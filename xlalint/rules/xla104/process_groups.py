"""A data-parallel script's CUDA parts: the NCCL backend of ``dist.init_process_group``,
the CUDA device indices given to ``DistributedDataParallel``, and memory shared between
processes (``model.share_memory()``), which XLA tensors cannot be.

On XLA the backend is ``"xla"`` with ``init_method="xla://"`` (with
``import torch_xla.distributed.xla_backend``): the rank and the world size come from the
XLA runtime. DDP of a module on the XLA device takes this process's XLA device or none.
"""

from __future__ import annotations

import ast

from xlalint.analysis.devices import is_other_device_string
from xlalint.analysis.semantic import dotted_name, keyword, method_name, parent, string_value
from xlalint.analysis.syntax import argument, has_star_args, is_alone_on_its_lines
from xlalint.analysis.values import call_sites, passed_argument
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import Fix, Import, Operation, RemoveKeyword, RemoveStatement, ReplaceExpr, SetKeyword
from xlalint.rules._cuda_api import (
    CUDA_BACKEND_CONSTANTS,
    CUDA_BACKENDS,
    DDP_DEVICE_KEYWORDS,
    ENV_INIT_METHOD,
    RUNTIME_GIVEN_ARGUMENTS,
    XLA_BACKEND,
    XLA_BACKEND_MODULE,
    XLA_INIT_METHOD,
)
from xlalint.rules.xla104.writer import Writer

_LOCAL_RANK = "LOCAL_RANK"
_ENVIRONMENT_GETS = frozenset({"os.environ.get", "os.getenv"})
# Calls that read a scope's names without naming them: a name may be read through them.
_NAMESPACE_READERS = ("locals", "vars", "eval", "exec", "globals")


def _has_main_block(module: ast.Module) -> bool:
    return any(
        isinstance(statement, ast.If)
        and isinstance(statement.test, ast.Compare)
        and isinstance(statement.test.left, ast.Name)
        and statement.test.left.id == "__name__"
        for statement in module.body
    )


class ProcessGroups:
    def __init__(self, writer: Writer):
        self.writer = writer
        self.ctx = writer.ctx
        self.devices = writer.devices

    def check_process_group(self, call: ast.Call) -> None:
        """``dist.init_process_group(backend="nccl")``: NCCL moves CUDA tensors only; on XLA
        the backend is "xla", and ``init_method="xla://"`` takes the rank and the world size
        from the XLA runtime."""
        backend = argument(call, 0, "backend")
        if backend is None:
            return
        # `backend = "nccl" if torch.cuda.is_available() else "gloo"` ... `init_process_group(backend)`:
        # the value is judged where it is written, the fix replaces the argument.
        value = self._only_value(backend)
        fallback = None
        # What the fix rewrites: the argument, or, for a variable (`backend = "nccl"`, a
        # setting the script may override), the values it is assigned, so it stays a setting.
        replaced = [backend]
        if self._names_nccl(backend):
            replacement = f'"{XLA_BACKEND}"'
            if isinstance(backend, ast.Name):
                replaced = self.devices.values_of(backend)
        elif (device_map := device_map_on_xla(value)) is not None:
            # "cpu:gloo,cuda:nccl": CPU tensors keep gloo, XLA tensors get the xla backend.
            replacement = device_map
        elif isinstance(value, ast.IfExp) and (nccl := [b for b in (value.body, value.orelse) if self._names_nccl(b)]):
            # `"nccl" if torch.cuda.is_available() else "gloo"`: False on an XLA machine, and
            # gloo cannot reduce XLA tensors. The fix drops the user's fallback: unsafe.
            replacement = f'"{XLA_BACKEND}"'
            fallback = next((b for b in (value.body, value.orelse) if b not in nccl), None)
        elif (default := self._nccl_default(backend)) is not None:
            self._check_nccl_default(call, backend, default)
            return
        else:
            return
        # The rest of the port (`init_method="xla://"`, `import torch_xla.distributed.xla_backend`)
        # is the fix's title and the explanation's.
        message = f'the "nccl" backend runs on CUDA only: use "{XLA_BACKEND}"'
        fix, dropped, refusal = self._process_group_fix(call, replaced, replacement, fallback)
        self._report(backend, message, fix, dropped, refusal)

    def _check_nccl_default(self, call: ast.Call, backend: ast.AST, default: ast.expr) -> None:
        """``def setup(rank, backend="nccl")``, ``--backend`` defaulting to "nccl": the
        default becomes "xla" where it is defined, the call keeps the user's setting."""
        message = (
            f'`{self.writer.short(backend, 30)}` defaults to "nccl" (line {default.lineno}), '
            f'which runs on CUDA only: use "{XLA_BACKEND}"'
        )
        replaced = [default, *self.devices.values_of(backend)] if isinstance(backend, ast.Name) else [default]
        # A caller's "nccl" is the same setting, ported with the default; its own variable is not.
        passed = self._passed_by_callers(backend)
        option = self.writer.options.read_by(backend)
        # `choices=["nccl", "gloo"]` gets "xla": `--backend xla` is accepted.
        choices = self.writer.xla_choice(option.call, self._is_nccl_constant) if option is not None else ()
        fix, dropped, refusal = self._process_group_fix(call, [*replaced, *passed], f'"{XLA_BACKEND}"', None, choices)
        other = next((value for value in passed if not self._is_nccl_constant(value)), None)
        if other is not None:
            fix, refusal = None, f"line {other.lineno} passes its own backend `{self.writer.short(other, 20)}`"
        self._report(backend, message, fix, dropped, refusal)

    def _report(self, backend: ast.AST, message: str, fix: Fix | None, dropped: list[str], refusal: str) -> None:
        if fix is None:
            message += f" (no fix: {refusal})"
        elif dropped:
            message += "; the fix drops " + ", ".join(dropped)
        self.writer.report(backend, message, fix)

    def _process_group_fix(
        self,
        call: ast.Call,
        replaced: list[ast.AST],
        replacement: str,
        fallback: ast.AST | None,
        also: tuple[Operation, ...] = (),
    ) -> tuple[Fix | None, list[str], str]:
        """The fix (with the operations ``also``), what it drops of the user's code (each
        makes it unsafe), or why there is none."""
        if has_star_args(call):
            return None, [], "the call passes `*args` or `**kwargs`"
        # Positionally: backend, init_method, timeout, world_size, rank, store.
        if len(call.args) > 3 or keyword(call, "store") is not None:
            return None, [], "a `store=`, or rank and world size by position"
        operations: list[Operation] = [ReplaceExpr(self.ctx.span(node), replacement) for node in replaced]
        operations.extend(also)
        dropped = [f"the fallback `{self.writer.short(fallback, 20)}`"] if fallback is not None else []
        init_method = argument(call, 1, "init_method")
        if init_method is None:
            operations.append(SetKeyword(self.ctx.span(call), "init_method", f'"{XLA_INIT_METHOD}"'))
        elif string_value(init_method) != XLA_INIT_METHOD:
            if string_value(init_method) != ENV_INIT_METHOD:
                # A tcp:// or file:// address of the user's own: "xla://" finds the master itself.
                dropped.append(f"the rendezvous `{self.writer.short(init_method, 20)}`")
            operations.append(ReplaceExpr(self.ctx.span(init_method), f'"{XLA_INIT_METHOD}"'))
        for name in RUNTIME_GIVEN_ARGUMENTS:
            given = keyword(call, name)
            if given is not None:
                # Ignored under "xla://": the runtime's own rank and world size replace them.
                dropped.append(f"`{name}=`")
                operations.append(RemoveKeyword(self.ctx.span(call), name))
        imports = () if self.ctx.semantic.imports.imports_module(XLA_BACKEND_MODULE) else (Import(XLA_BACKEND_MODULE),)
        fix = self.writer.fix(
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
        values = self.devices.values_of(node)
        return values[0] if len(values) == 1 else node

    def _names_nccl(self, node: ast.AST) -> bool:
        """``"nccl"``, ``dist.Backend.NCCL``, or a variable only ever assigned one of them."""
        if self._is_nccl_constant(node):
            return True
        if not isinstance(node, ast.Name):
            return False
        values = self.devices.values_of(node)
        return bool(values) and all(self._is_nccl_constant(value) for value in values)

    def _is_nccl_constant(self, node: ast.AST) -> bool:
        value = string_value(node)
        if value is not None:
            return value.lower() in CUDA_BACKENDS
        return isinstance(node, ast.Attribute) and self.ctx.semantic.qualified_name(node) in CUDA_BACKEND_CONSTANTS

    def _nccl_default(self, node: ast.AST) -> ast.expr | None:
        """The "nccl" default of what ``node`` reads: a parameter's (``def setup(rank,
        backend="nccl")``, never assigned anything but "nccl" in the body), or a
        command-line option's (``args.dist_backend`` of ``add_argument("--dist-backend",
        default="nccl")``)."""
        if isinstance(node, ast.Name):
            default = self.devices.parameter_default(node)
            values = self.devices.values_of(node)
            nccl = default is not None and all(self._is_nccl_constant(v) for v in (default, *values))
            return default if nccl else None
        option = self.writer.options.read_by(node)
        if option is None or option.default is None or not self._is_nccl_constant(option.default):
            return None
        return option.default

    def _passed_by_callers(self, node: ast.AST) -> list[ast.expr]:
        """The values the calls of the function in this module pass for the parameter ``node``."""
        function = self.devices.scope_of(node) if isinstance(node, ast.Name) else None
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return []
        sites = call_sites(function, self.ctx.semantic)
        passed = (passed_argument(site, function, node.id) for site in sites)  # type: ignore[attr-defined]
        return [value for value in passed if value is not None]

    def check_ddp(self, call: ast.Call) -> None:
        """``DDP(model, device_ids=[local_rank], output_device=local_rank)``: CUDA device
        indices. For a module on one non-CPU device, torch 2.9's DDP moves every input to
        ``torch.device(<type>, device_ids[0])`` on a CUDA-style side stream: ``xla:<index>``
        raises for any index but the process's own device (index 0 under PJRT)."""
        cuda = []
        for position, name in enumerate(DDP_DEVICE_KEYWORDS, start=1):
            value = argument(call, position, name)
            unset = value is None or (isinstance(value, ast.Constant) and value.value is None)
            if not unset and not self.devices.names_xla_device(value):
                cuda.append((name, value))
        if not cuda:
            return
        name, value = cuda[0]
        # What to pass instead is the fix's title; why is the explanation's.
        message = (
            f"`{name}={self.writer.short(value, 24)}` is a CUDA index: DDP moves inputs to `xla:<index>`, which raises"
        )
        if has_star_args(call) or any(keyword(call, n) is None for n, _ in cuda):
            self.writer.report(value, message + " (no fix: passed by position)", None)
            return
        # `device_ids=[torch_xla.device()]` keeps what the script relies on: DDP moves each
        # input to this process's own device, `xla:0`. Written as the call, or as the
        # variable that holds it above (`device = torch_xla.device()`, also one this port
        # makes so), never as a variable the port makes the string "xla": its index is
        # None, not the process's. `torch.device("xla")`, all a fix may write where it runs
        # at import time, has no index either: there `device_ids` is removed.
        keep_ids = any(n == "device_ids" for n, _ in cuda) and not self.devices.evaluated_at_import(call)
        device, imports = ("", ())
        if keep_ids:
            variable = self.writer.reads.device_object_variable(call)
            device, imports = (variable, ()) if variable is not None else self.writer.xla_device()
        operations = [
            ReplaceExpr(self.ctx.span(v), f"[{device}]")
            if n == "device_ids" and keep_ids
            else RemoveKeyword(self.ctx.span(call), n)
            for n, v in cuda
        ]
        what = " and ".join(
            f"`device_ids=[{device}]`" if n == "device_ids" and keep_ids else f"no `{n}`" for n, _ in cuda
        )
        self.writer.report(value, message, self.writer.fix("safe", f"Use {what}", *operations, imports=imports))

    def check_unused_local_rank(self) -> None:
        """``local_rank = int(os.environ["LOCAL_RANK"])`` that nothing reads, in an XLA
        script: torchrun's index of the process's CUDA device, left over once the port has
        replaced its CUDA uses (``torch.cuda.set_device(local_rank)``,
        ``device_ids=[local_rank]``) with the XLA device. The statement only reads the
        environment: the safe fix removes it. Not at module level of a file without a
        ``__main__`` block (another module may import the name)."""
        if not self.ctx.distributed.uses_xla or self.ctx.semantic.calls_of(*_NAMESPACE_READERS):
            return
        for constant in self.ctx.semantic.nodes_of(ast.Constant):
            if constant.value != _LOCAL_RANK:
                continue
            statement = self._local_rank_assignment(constant)
            if statement is None:
                continue
            target = statement.targets[0]
            scope = self.devices.scope_of(target)  # type: ignore[arg-type]
            if isinstance(scope, ast.Module) and not _has_main_block(scope):
                continue
            if self.writer.reads.reads_of(target) or len(self.devices.values_of(target)) != 1:  # type: ignore[arg-type]
                continue
            name = target.id  # type: ignore[attr-defined]
            message = f"`{name}` holds torchrun's `LOCAL_RANK`, a CUDA device index, and nothing reads it"
            fix = self.writer.fix("safe", f"Remove the unused `{name}`", RemoveStatement(self.ctx.span(statement)))
            self.writer.report(statement, message, fix)

    def _local_rank_assignment(self, constant: ast.Constant) -> ast.Assign | None:
        """``<name> = [int(]os.environ["LOCAL_RANK"][)]`` (or ``os.environ.get``/``os.getenv``
        of it) around ``constant``: a statement that only reads the environment."""
        read: ast.AST | None = parent(constant)
        if isinstance(read, ast.Subscript):
            if self.ctx.semantic.qualified_name(read.value) != "os.environ":
                return None
        elif isinstance(read, ast.Call):
            if self.ctx.semantic.call_name(read) not in _ENVIRONMENT_GETS or read.args[:1] != [constant]:
                return None
            if any(not isinstance(a, ast.Constant) for a in (*read.args, *(k.value for k in read.keywords))):
                return None
        else:
            return None
        value = parent(read)
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "int"
            and value.args == [read]
            and not value.keywords
        ):
            value, read = parent(value), value
        if (
            isinstance(value, ast.Assign)
            and value.value is read
            and len(value.targets) == 1
            and isinstance(value.targets[0], ast.Name)
            and is_alone_on_its_lines(value)
        ):
            return value
        return None

    def check_share_memory(self, call: ast.Call) -> None:
        """``model.share_memory()`` (Hogwild): shared memory holds CPU tensors only, and the
        port puts the model on the XLA device. No fix: the training design has to change."""
        receiver = dotted_name(call.func.value)  # type: ignore[attr-defined]
        moved = self._moved_to_a_device(receiver) if receiver else None
        if moved is None:
            return  # a model that stays on the CPU can be shared
        # What to do instead (one process per device, or a CPU model) is the explanation's.
        message = (
            f"`{self.writer.short(call, 30)}`: line {moved.lineno} puts `{receiver}` on the XLA device, "
            "whose tensors cannot be shared"
        )
        self.writer.report(call, message, None)

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


def device_map_on_xla(node: ast.AST) -> str | None:
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


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID = [
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
        def setup(rank, backend="gloo"):
            dist.init_process_group(backend, rank=rank)
        cpu_model = Net()
        cpu_model.share_memory()
        """
    ),
]
INVALID = [
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
    # A device variable the port makes the XLA device is what DDP gets; `local_rank`,
    # which nothing reads once ported, goes in the next pass of the fix.
    Invalid(
        """
        import os
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        def main():
            local_rank = int(os.environ["LOCAL_RANK"])
            device = torch.device("cuda", local_rank)
            model = DDP(Net().to(device), device_ids=[local_rank], output_device=local_rank)
        """,
        fixed="""
        import os
        import torch
        import torch_xla
        from torch.nn.parallel import DistributedDataParallel as DDP

        def main():
            device = torch_xla.device()
            model = DDP(Net().to(device), device_ids=[device])
        """,
        count=2,
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
    # A backend from a command-line option that defaults to "nccl": the default becomes
    # "xla", the call keeps the option (dropping its own rendezvous is unsafe). No fix:
    # device indices passed to DDP by position, and a Hogwild model shared between
    # processes (XLA tensors cannot be).
    Invalid(
        """
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        parser.add_argument("--dist-backend", default="nccl", type=str, choices=("nccl", "gloo"))
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url)
        ddp = DistributedDataParallel(model, [rank])
        model = Net().to(device)
        model.share_memory()
        """,
        unsafe_fixed="""
        import torch
        import torch.distributed as dist
        import torch_xla.distributed.xla_backend
        from torch.nn.parallel import DistributedDataParallel

        parser.add_argument("--dist-backend", default="xla", type=str, choices=("nccl", "gloo", "xla"))
        dist.init_process_group(backend=args.dist_backend, init_method="xla://")
        ddp = DistributedDataParallel(model, [rank])
        model = Net().to(device)
        model.share_memory()
        """,
        count=3,
    ),
    # A parameter that defaults to "nccl" (the DDP tutorial's `setup`): the default
    # becomes "xla" where it is defined, the call keeps the parameter. A caller that
    # passes its own backend leaves it reported without a fix.
    Invalid(
        """
        import torch.distributed as dist
        def setup(backend="nccl"):
            dist.init_process_group(backend)
        def connect(backend="nccl"):
            dist.init_process_group(backend=backend)
        setup()
        connect(backend=args.backend)
        """,
        fixed="""
        import torch.distributed as dist
        import torch_xla.distributed.xla_backend

        def setup(backend="xla"):
            dist.init_process_group(backend, init_method="xla://")
        def connect(backend="nccl"):
            dist.init_process_group(backend=backend)
        setup()
        connect(backend=args.backend)
        """,
        count=2,
    ),
    # A backend setting (nanoGPT's `backend = 'nccl'`): it stays a setting, now "xla".
    Invalid(
        """
        import torch.distributed as dist
        backend = 'nccl'  # 'nccl', 'gloo', etc.
        dist.init_process_group(backend=backend)
        """,
        fixed="""
        import torch.distributed as dist
        import torch_xla.distributed.xla_backend

        backend = "xla"  # 'nccl', 'gloo', etc.
        dist.init_process_group(backend=backend, init_method="xla://")
        """,
        count=1,
    ),
]
