"""How XLA104 reports and what its fixes write.

A finding is made once, at one node: the ``"cuda"`` inside a reported
``torch.device("cuda")`` is claimed by that finding. A fix writes the XLA device as the
target version and the place need it (``torch_xla.device()``, ``xm.xla_device()``, or
``torch.device("xla")`` where it would run at import time) and spells the names of the
table in ``_cuda_api`` as this file imports them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from xlalint.analysis.accelerator_tests import Remaining, assume, is_elif, test_root
from xlalint.analysis.device_reads import DeviceReads
from xlalint.analysis.options import CommandLineOptions
from xlalint.analysis.semantic import keyword, parent, string_value, subtree
from xlalint.analysis.syntax import is_alone_on_its_lines, whole_statement
from xlalint.model import Fix, Import, InsertStatement, Operation, RemoveStatement, ReplaceExpr, Span

if TYPE_CHECKING:
    from xlalint.engine.rule import Rule


class Writer:
    def __init__(self, rule: Rule):
        self.rule = rule
        self.ctx = rule.ctx
        self.devices = rule.ctx.devices
        # Command-line options (`--device`, `--backend`) and how device values are read.
        self.options = CommandLineOptions(rule.ctx.semantic)
        self.reads = DeviceReads(rule.ctx.semantic, self.devices, self.options)
        # Nodes inside a finding already made: a finding is reported once, at one node.
        self.claimed: set[int] = set()
        # `torch.device(...)` calls given as `map_location`: their fix is "cpu".
        self.map_locations: set[int] = set()
        # The statement before each statement of the blocks indexed so far.
        self._previous: dict[int, ast.stmt | None] = {}
        self._xla_devices: dict[int, tuple[str, tuple[Import, ...]]] = {}

    def fix(self, *args, **kwargs) -> Fix:
        return self.rule.fix(*args, **kwargs)

    def report(self, node: ast.AST, message: str, fix: Fix | None, keep: ast.AST | None = None) -> None:
        """Report ``node`` unless a finding already covers it, and claim what is inside
        it (but ``keep``: the receiver of ``.cuda()`` may hold findings of its own)."""
        if id(node) in self.claimed:
            return
        # `subtree`, not `ast.walk`: a set in any order, and no finding is made at the
        # shared contexts and operators it leaves out (a third of a check's XLA104 time).
        self.claimed.update(map(id, subtree(node, keep)))
        self.rule.report(node, message, fix)

    def report_device(
        self,
        node: ast.AST,
        message: str,
        to_cpu: bool = False,
        as_string: tuple[Operation, ...] | None = None,
        also: tuple[Operation, ...] = (),
    ) -> None:
        """Report a device expression; its fix replaces it with the XLA device (or
        with ``"cpu"`` for ``map_location``). ``as_string``: the device is also read as a
        string, so the fix writes ``"xla"`` (both a device and a string) with these
        operations, which port what the script derives from the string. ``also``: the
        operations that port the tests of the device's type (``device.type == "cuda"``)."""
        if id(node) in self.claimed:
            return
        if to_cpu or id(node) in self.map_locations:
            fix = self.fix("safe", 'Load onto the CPU: `map_location="cpu"`', ReplaceExpr(self.ctx.span(node), '"cpu"'))
            message += ": load onto the CPU"
        else:
            device, imports = self.xla_device(node) if as_string is None else self.xla_string()
            # At import time that is `torch.device("xla")`, which starts no runtime (the
            # explanation says why).
            message += f": use `{device}`"
            fallback = self.devices.fallback_of(node)
            applicability = "safe"
            if fallback is not None:
                # The other branch is the user's own choice of device: the fix drops it.
                applicability = "unsafe"
                message += f"; the fix drops the fallback `{self.short(fallback, 30)}`"
            operations = (ReplaceExpr(self.ctx.span(node), device), *(as_string or ()), *also)
            fix = self.fix(applicability, f"Use `{device}`", *operations, imports=imports)
        self.report(node, message, fix)

    def xla_string(self) -> tuple[str, tuple[Import, ...]]:
        """``"xla"``: the XLA device where a string is needed (``.to("xla")``,
        ``torch.device("xla")``, ``"xla" in device``); ``import torch_xla`` registers it."""
        _, imports = self.ctx.reference("torch_xla")
        return '"xla"', imports

    def quoted_xla(self, string: ast.AST) -> str:
        """``"xla"`` in the quotes the user wrote for ``string``."""
        quote = "'" if self.ctx.source_of(string).startswith("'") else '"'
        return f"{quote}xla{quote}"

    def xla_choice(self, option: ast.Call, ported: Callable[[ast.AST], bool]) -> tuple[Operation, ...]:
        """``add_argument(..., choices=["cuda", "cpu"])`` of an option whose default the fix
        makes "xla": the choices get ``"xla"`` too, so that ``--device xla`` is accepted."""
        choices = keyword(option, "choices")
        if choices is None or not isinstance(choices.value, (ast.List, ast.Tuple, ast.Set)) or not choices.value.elts:
            return ()
        elements = choices.value.elts
        if any(string_value(e) == "xla" for e in elements) or not any(ported(e) for e in elements):
            return ()
        last = self.ctx.span(elements[-1])
        return (ReplaceExpr(last, "{last}, " + self.quoted_xla(elements[-1]), (("last", last),)),)

    def xla_device(self, node: ast.AST | None = None) -> tuple[str, tuple[Import, ...]]:
        """The XLA device as a fix writes it at ``node``: ``torch_xla.device()`` (``xm.xla_device()``
        before 2.4), or, where it would be evaluated at import time, ``torch.device("xla")``:
        the default XLA device of whichever process uses it, which starts no runtime.
        Found once per node: a ``.cuda()`` asks for its message and again for its fix."""
        if node is None:
            return self._xla_device(None)
        found = self._xla_devices.get(id(node))
        if found is None:
            found = self._xla_devices[id(node)] = self._xla_device(node)
        return found

    def _xla_device(self, node: ast.AST | None) -> tuple[str, tuple[Import, ...]]:
        if node is not None and self.devices.evaluated_at_import(node):
            torch, imports = self.ctx.reference("torch")
            _, backend = self.ctx.reference("torch_xla")  # `import torch_xla` registers the "xla" device
            return f'{torch}.device("xla")', (*imports, *backend)
        if node is not None and (variable := self.devices.xla_device_variable(node)) is not None:
            return variable, ()  # `device = torch_xla.device()` above: reuse it
        function, imports = self.ctx.xla_api("device", "xla_device")
        return f"{function}()", imports

    def spell(self, text: str, node: ast.AST, short: str = "") -> tuple[str, tuple[Import, ...]]:
        """Fill the table's placeholders with the names this file and target version use,
        and collect the imports the names need (``{arg0}`` is left for the fix)."""
        spellers = {
            "xm": lambda: self.ctx.reference("torch_xla.core.xla_model", "xm"),
            "xr": lambda: self.ctx.reference("torch_xla.runtime", "xr"),
            "torch_xla": lambda: self.ctx.reference("torch_xla"),
            "device": lambda: self.xla_device(node),
            "manual_seed": lambda: self.ctx.xla_api("manual_seed", "set_rng_state"),
            "sync": lambda: self.ctx.xla_api("sync", "mark_step"),
        }
        imports: list[Import] = []
        for key, speller in spellers.items():
            if "{" + key + "}" in text:
                spelled, needed = speller()
                text = text.replace("{" + key + "}", spelled)
                imports.extend(needed)
        return text.replace("{name}", short), tuple(imports)

    def wait_for_the_device(self, call: ast.Call) -> tuple[tuple[Operation, ...], tuple[Import, ...]] | None:
        """The port of a CUDA wait for the device (``torch.cuda.synchronize()``,
        ``stream.synchronize()``): ``torch_xla.sync()`` then ``xm.wait_device_ops()``. The
        wait alone runs nothing: the lazy graph is still pending, so a timing block
        (``synchronize(); t1 = time.time()``) would measure the tracing, not the step. Only
        the wait where a sync directly precedes. None when ``call`` is not a statement of
        its own (there is no place for the sync)."""
        statement = whole_statement(call)
        if statement is None or self._after_a_header(statement):
            return None
        wait, imports = self.spell("{xm}.wait_device_ops()", call)
        previous = self._previous_statement(statement)
        if (
            isinstance(previous, ast.Expr)
            and isinstance(previous.value, ast.Call)
            and self.ctx.steps.is_sync_call(previous.value)
        ):
            return (ReplaceExpr(self.ctx.span(call), wait),), imports
        # The call becomes the sync (its comments stay with it), the wait follows.
        sync, sync_imports = self.ctx.xla_api("sync", "mark_step", at=call)
        operations = (
            ReplaceExpr(self.ctx.span(call), f"{sync}()"),
            InsertStatement(self.ctx.span(statement), wait, "after"),
        )
        imports = (*sync_imports, *imports)
        return operations, imports

    def _previous_statement(self, statement: ast.stmt) -> ast.stmt | None:
        """The statement right before ``statement`` in its block, if any. Each block is
        indexed once, so that many waits in one block cost one pass over it."""
        if id(statement) not in self._previous:
            owner = parent(statement)
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(owner, field, None)
                if isinstance(block, list) and any(s is statement for s in block):
                    for before, after in zip([None, *block], block):
                        self._previous[id(after)] = before
        return self._previous.get(id(statement))

    def _after_a_header(self, statement: ast.stmt) -> bool:
        """``if x: stmt``: the statement shares its line with a block's header, where no
        statement can go before or after it alone."""
        line = self.ctx.lines[statement.lineno - 1].encode()
        return bool(line[: statement.col_offset].strip())

    def assume_true(
        self, call: ast.AST, truthy: Callable[[ast.AST], bool], known: bool = True
    ) -> tuple[Operation, ...] | None:
        """The operations that treat ``call`` (and whatever ``truthy`` accepts) as True on
        XLA, following the test it is in: ``a if call else b`` -> ``a``; ``not call or x``
        -> ``x``; ``if call: body`` -> the body, in place of the ``if`` (never ``if True:``);
        a value elsewhere -> ``True``. None where the test cannot be rewritten that way.
        ``known=False``: the same, with ``call`` False (``scaler.is_enabled()``)."""
        root = test_root(call)
        value = assume(root, truthy, known)
        if value is None or value is root:
            return None
        holder = parent(root)
        if isinstance(value, bool):
            if isinstance(holder, ast.If) and holder.test is root:
                return self.take_branch(holder, value)
            if isinstance(holder, ast.IfExp) and holder.test is root:
                branch = holder.body if value else holder.orelse
                # The branch binds tighter than the conditional it replaces: no parentheses.
                return (ReplaceExpr(self.ctx.span(holder), "{branch}", (("branch", self.ctx.span(branch)),)),)
            if isinstance(holder, (ast.While, ast.Assert, ast.comprehension)):
                return None
            return (ReplaceExpr(self.ctx.span(root), "True" if value else "False"),)
        parts: list[tuple[str, Span]] = []
        template = self._remaining(value, parts)
        if isinstance(value, Remaining) and not isinstance(holder, (ast.stmt, ast.IfExp, ast.keyword, ast.Call)):
            template = f"({template})"
        return (ReplaceExpr(self.ctx.span(root), template, tuple(parts)),)

    def _remaining(self, value: ast.expr | Remaining, parts: list[tuple[str, Span]]) -> str:
        if isinstance(value, Remaining):
            joiner = " and " if isinstance(value.operator, ast.And) else " or "
            pieces = []
            for operand in value.operands:
                text = self._remaining(operand, parts)
                pieces.append(f"({text})" if isinstance(operand, Remaining) else text)
            return joiner.join(pieces)
        name = f"v{len(parts)}"
        parts.append((name, self.ctx.span(value)))
        loose = isinstance(value, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr))
        return f"({{{name}}})" if loose else f"{{{name}}}"

    def take_branch(self, statement: ast.If, value: bool) -> tuple[Operation, ...] | None:
        """The ``if`` replaced by the branch its test now takes (its body when ``value``,
        else its ``else``), dedented; removed when that branch is empty. None for an
        ``elif`` clause, an ``elif`` chain left, or an ``if`` that shares its lines."""
        if is_elif(statement, self.ctx.lines) or not is_alone_on_its_lines(statement):
            return None
        branch = statement.body if value else statement.orelse
        if not branch:
            return (RemoveStatement(self.ctx.span(statement)),)
        if isinstance(branch[0], ast.If) and is_elif(branch[0], self.ctx.lines):
            return None
        code = self.dedented(statement, branch)
        if code is None:
            return None
        return (
            InsertStatement(self.ctx.span(statement), code, "before"),
            RemoveStatement(self.ctx.span(statement)),
        )

    def dedented(self, header: ast.stmt, block: list[ast.stmt]) -> str | None:
        """The source of ``block`` at column 0, with the comment lines above its first
        statement; None when a line of it is not indented as the block is (a string)."""
        first, last = block[0], block[-1]
        if first.lineno == header.lineno:  # `if x: a; b`
            return "\n".join(self.ctx.source_of(s) for s in block)
        start = first.lineno
        while start - 1 > header.lineno and self.ctx.lines[start - 2].lstrip().startswith("#"):
            start -= 1
        indent = self.ctx.span(first).col
        lines = []
        for line in self.ctx.lines[start - 1 : last.end_lineno]:
            line = line.rstrip("\r\n")
            if line.strip() and line[:indent].strip():
                return None
            lines.append(line[indent:])
        return "\n".join(lines)

    def imported_name(self, func: ast.AST) -> tuple[Import, ...]:
        """``from torch.cuda.amp import autocast``: the import the fix may leave unused."""
        binding = self.ctx.semantic.imports.import_binding(func)
        return (binding,) if binding is not None else ()

    def short(self, node: ast.AST, limit: int = 60) -> str:
        """``node``'s source on one line, cut to ``limit`` characters for a message."""
        text = " ".join(self.ctx.source_of(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."
