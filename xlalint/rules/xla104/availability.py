"""``torch.cuda.is_available()`` (or ``torch.accelerator.is_available()``): it is False
on an XLA machine, so the ported script would take its path without an accelerator.
Where it chooses the device (``if torch.cuda.is_available(): model.cuda()``, or through
a flag: ``use_cuda = not args.no_cuda and torch.cuda.is_available()`` ... ``if
use_cuda:``) that is the CPU; elsewhere it skips what the script does on an accelerator
(``if torch.cuda.is_available(): torch.cuda.manual_seed(s)``, ``assert
torch.cuda.is_available()``), or picks float16 where bfloat16 is meant (``"bfloat16" if
torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"``: the
whole condition is about the accelerator, and an XLA device has bfloat16). Reported at
the call (the whole condition for the latter); the unsafe fix treats the XLA device as
available.

The fix follows the value (``analysis/accelerator_tests``), never writing ``if True:``:
an ``if`` is replaced by the branch it now takes, ``not torch.cuda.is_available() or x``
becomes ``x``, a flag's definition ``True``. A flag is ported only with every use (the
tensor type it chooses moves with it, see ``tensor_types``), and no test is made True
where it guards code XLA104 cannot port (a memory query, ``get_device_properties``):
that test is reported with the line to port first. A test whose branches only print or
build the text of a log line is no port site (two such tests are often tied: one adds
``{memory}`` to a format, the other fills it). A CUDA seed under such a test goes before
it (``moved_seed``), where it runs on XLA.
"""

from __future__ import annotations

import ast
from functools import cached_property

from xlalint.analysis.accelerator_tests import assume, flag_set_by, guarded, is_elif, test_root
from xlalint.analysis.devices import CUDA_ONLY_KEYWORDS, CUDA_ONLY_METHODS, IS_AVAILABLE, condition_holding
from xlalint.analysis.semantic import dotted_name, enclosing_statement, method_name, parent, string_value
from xlalint.analysis.syntax import is_alone_on_its_lines, whole_statement
from xlalint.engine.rule import Invalid, Valid
from xlalint.model import PORT_NEEDS_FIX, Import, InsertStatement, Operation, RemoveStatement, ReplaceExpr
from xlalint.rules._cuda_api import CUDA_BACKENDS, lookup
from xlalint.rules.xla104.tensor_types import TensorTypes
from xlalint.rules.xla104.writer import Writer

# What an XLA device has that the CUDA checks ask about: a condition made only of these
# is True on XLA.
CAPABILITIES = IS_AVAILABLE | {"torch.cuda.is_bf16_supported"}
FALSE_ON_XLA = "is False on an XLA machine"
ASSUME_AVAILABLE = "Treat the XLA device as available"
# The table's actions for CUDA-only calls XLA104 has no port for: code a test guards that
# holds one keeps the test (a memory query would print 0, `get_device_properties` raises).
UNPORTED = frozenset({"report", "query"})
CUDA_SEEDS = frozenset({"torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.random.manual_seed"})
# What a branch may do and still change nothing on the device: say something.
_REPORTING_CALLS = frozenset(
    {"warnings.warn", "torch_xla.core.xla_model.master_print", "torch_xla.core.xla_model.add_step_closure"}
)
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})


class Availability:
    def __init__(self, writer: Writer, tensor_types: TensorTypes):
        self.writer = writer
        self.ctx = writer.ctx
        self.devices = writer.devices
        self.tensor_types = tensor_types
        # The calls seen in the walk, judged in `finish` (do they choose the device?).
        self.calls: list[ast.Call] = []

    def add(self, call: ast.Call) -> None:
        self.calls.append(call)

    def check(self) -> None:
        for call in self.calls:
            if id(call) in self.writer.claimed or self.ctx.semantic.call_name(call) not in IS_AVAILABLE:
                continue
            text = self.writer.short(call, 32)
            test_of = condition_holding(call)
            if isinstance(test_of, ast.IfExp) and flag_set_by(call) is not None:
                test_of = None  # `cuda = True if torch.cuda.is_available() else False`: a flag
            if isinstance(test_of, ast.If) and self.devices.decided_later(test_of) is not None:
                continue  # `device = xm.xla_device()` after it decides the device
            if test_of is not None and self.tensor_types.is_selection(test_of):
                operations, imports, blocker = self.tensor_types.selection_port(test_of)  # type: ignore[arg-type]
                message = f"`{text}` chooses a CUDA tensor type and {FALSE_ON_XLA}"
                self._report(call, message, operations, blocker, imports, PORT_NEEDS_FIX)
                continue
            if test_of is not None and self.devices.chooses_device(test_of):
                message = f"`{text}` chooses the device and {FALSE_ON_XLA}: the script would run on the CPU"
                self._report_assumed(call, message, [test_of], PORT_NEEDS_FIX)
                continue
            if test_of is not None:
                self._report_elsewhere(call, text, test_of)
                continue
            flag = flag_set_by(call)
            if flag is not None:
                uses = self._conditions_reading(flag)
                chooser = next(
                    (c for c in uses if self.devices.chooses_device(c) or self.tensor_types.is_selection(c)), None
                )
                if chooser is not None:
                    message = f"`{flag}`, from `{text}`, {FALSE_ON_XLA}: line {chooser.lineno} would choose the CPU"
                else:
                    message = f"`{text}` {FALSE_ON_XLA}: this value says there is no accelerator"
                self._report_flag(call, flag, uses, message, chooser is not None)
                continue
            self._report_elsewhere(call, text, test_of)

    # -- the fixes: the value of the test, with what it feeds ----------------------------------
    def _report(
        self,
        call: ast.Call,
        message: str,
        operations: tuple[Operation, ...],
        blocker: ast.AST | None,
        imports: tuple[Import, ...] = (),
        title: str = ASSUME_AVAILABLE,
    ) -> None:
        fix = None
        if blocker is not None:
            message = (
                f"{_subject(message)} is False on XLA; no fix: line {blocker.lineno} "
                f"(`{self.writer.short(blocker, 30)}`) cannot follow it"
            )
        elif operations:
            fix = self.writer.fix("unsafe", title, *operations, imports=imports)
        self.writer.report(call, message, fix)

    def _report_assumed(
        self, call: ast.Call, message: str, tests: list[ast.If | ast.IfExp], title: str = ASSUME_AVAILABLE
    ) -> None:
        """Report ``call`` with the fix that treats it as True, unless the code its tests
        guard needs CUDA (a call XLA104 cannot port): that code runs once the test is
        True, so the test keeps guarding it (no fix, the line named)."""
        needs_cuda = self._cuda_only_code(tests)
        if needs_cuda is not None:
            name = self.ctx.semantic.call_name(needs_cuda) if isinstance(needs_cuda, ast.Call) else None
            code = name or self.writer.short(needs_cuda, 40)
            message = f"{_subject(message)} guards `{code}` (line {needs_cuda.lineno}), which has no XLA port: no fix"
            self.writer.report(call, message, None)
            return
        operations = self.writer.assume_true(call, self._true_on_xla)
        self._report(call, message, operations or (), None, title=title)

    def _report_flag(
        self, call: ast.Call, flag: str, uses: list[ast.If | ast.IfExp], message: str, chooses: bool
    ) -> None:
        """A flag is ported at its definition only with every use: the tensor types it
        chooses follow it, and no use may guard code that needs CUDA."""
        title = PORT_NEEDS_FIX if chooses else ASSUME_AVAILABLE
        needs_cuda = self._cuda_only_code(uses)
        if needs_cuda is not None:
            self._report_assumed(call, message, uses)
            return
        operations = list(self.writer.assume_true(call, self._true_on_xla) or ())
        if not operations:
            self.writer.report(call, message, None)
            return
        selections = [use for use in uses if self.tensor_types.is_selection(use)]
        if selections and assume(test_root(call), self._true_on_xla) is not True:
            message = (
                f"{_subject(message)} is False on XLA; no fix: the tensor type at line {selections[0].lineno} "
                f"would move to XLA even where `{flag}` is False"
            )
            self.writer.report(call, message, None)
            return
        imports: list[Import] = []
        for selection in selections:
            ported, needed, blocker = self.tensor_types.selection_port(selection)  # type: ignore[arg-type]
            if blocker is not None:
                self._report(call, message, (), blocker)
                return
            operations.extend(ported)
            imports.extend(needed)
        self._report(call, message, tuple(operations), None, tuple(imports), title)

    def _true_on_xla(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and self.ctx.semantic.call_name(node) in CAPABILITIES

    def _cuda_only_code(self, tests: list[ast.If | ast.IfExp]) -> ast.AST | None:
        """The first code that only CUDA runs and XLA104 has no port for in what ``tests``
        guard: a memory query, ``get_device_properties``, ``x.pin_memory()``,
        ``fused=True``. Once the test is True on XLA it would run there (and raise, or
        print a number no device gave)."""
        for test in tests:
            for node in guarded(test):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Call):
                        row = lookup(self.ctx.semantic.call_name(sub) or "")
                        if (row is not None and row[1].action in UNPORTED) or method_name(sub) in CUDA_ONLY_METHODS:
                            return sub
                    elif (
                        isinstance(sub, ast.keyword)
                        and sub.arg in CUDA_ONLY_KEYWORDS
                        and not (isinstance(sub.value, ast.Constant) and sub.value.value in (False, None))
                    ):
                        return sub
        return None

    def moved_seed(self, call: ast.Call, function: str) -> tuple[Operation, ...] | None:
        """A CUDA seed in the body of ``if torch.cuda.is_available():`` (or of a flag built on
        it) is seeded where it runs: ``function(seed)`` (the XLA seed) goes before the ``if``, which
        is False on XLA. The ``if`` goes when its body is nothing but seeds and it has no
        ``else``. None when the seed is not in such a body; () when it cannot move."""
        statement = whole_statement(call)
        test = parent(statement) if statement is not None else parent(enclosing_statement(call))
        if not (isinstance(test, ast.If) and self._asks_availability(test.test)):
            return None
        if statement is None or not any(s is statement for s in test.body):
            return ()
        if is_elif(test, self.ctx.lines) or not is_alone_on_its_lines(test):
            return ()
        if test.orelse or not all(self._is_cuda_seed(s) for s in test.body):
            code = f"{function}({self.ctx.source_of(call.args[0])})"
            return (InsertStatement(self.ctx.span(test), code, "before"), RemoveStatement(self.ctx.span(statement)))
        seeds = []
        for seed in test.body:
            seed_call = seed.value  # type: ignore[attr-defined]
            ported = f"{function}({self.ctx.source_of(seed_call.args[0])})"
            if ported not in seeds:
                seeds.append(ported)
        # The test's own finding is this one: the `if` goes with the seeds.
        self.writer.claimed.update(id(n) for n in ast.walk(test.test))
        return (InsertStatement(self.ctx.span(test), "\n".join(seeds), "before"), RemoveStatement(self.ctx.span(test)))

    def _is_cuda_seed(self, statement: ast.stmt) -> bool:
        return (
            isinstance(statement, ast.Expr)
            and isinstance(statement.value, ast.Call)
            and len(statement.value.args) == 1
            and not statement.value.keywords
            and self.ctx.semantic.call_name(statement.value) in CUDA_SEEDS
        )

    def _asks_availability(self, test: ast.expr) -> bool:
        for node in ast.walk(test):
            if self._true_on_xla(node) and self.ctx.semantic.call_name(node) in IS_AVAILABLE:
                return True
            if isinstance(node, (ast.Name, ast.Attribute)) and dotted_name(node) in self._flags:
                return True
        return False

    @cached_property
    def _flags(self) -> frozenset[str]:
        """The flags built on an availability test (``use_cuda``, ``args.cuda``)."""
        flags = set()
        for call in self.ctx.semantic.calls:
            if self.ctx.semantic.call_name(call) in IS_AVAILABLE and (flag := flag_set_by(call)) is not None:
                flags.add(flag)
        return frozenset(flags)

    def _report_elsewhere(self, call: ast.Call, text: str, test_of: ast.If | ast.IfExp | None) -> None:
        """An availability test that chooses no device: what the script does on an
        accelerator (seed it, check for it) is what it must do on the XLA device."""
        stmt = parent(call)
        if isinstance(stmt, ast.Assert) and stmt.test is call and is_alone_on_its_lines(stmt):
            fix = self.writer.fix("unsafe", "Remove the assertion", RemoveStatement(self.ctx.span(stmt)))
            self.writer.report(call, f"`{text}` is asserted and {FALSE_ON_XLA}: the script would stop here", fix)
            return
        if test_of is not None and _chooses_a_backend(test_of):
            return  # `"nccl" if torch.cuda.is_available() else "gloo"`: the process group's finding
        if _chooses_float16(call, test_of):
            return  # `fp16=torch.cuda.is_available()`: False on XLA is right (see `_chooses_float16`)
        if isinstance(test_of, ast.If) and self._only_reports(test_of):
            return  # `if not torch.cuda.is_available(): print("running on the CPU")`: nothing runs differently
        if test_of is not None:
            where = "this test takes the path without an accelerator"
        else:
            where = "this value says there is no accelerator"
        message = f"`{text}` {FALSE_ON_XLA}: {where}"
        self._report_assumed(call, message, [test_of] if test_of is not None else [])

    def _only_reports(self, test_of: ast.If) -> bool:
        """Both branches of the ``if`` (its ``elif``\\s too) only print, warn, log, or build
        the text of a log line (``log_msg.append("max mem: {memory:.0f}")``): nothing runs
        differently on the device, and porting the test alone would break the log line
        that fills the text in another test."""
        return self._block_only_reports([*test_of.body, *test_of.orelse])

    def _block_only_reports(self, block: list[ast.stmt]) -> bool:
        for stmt in block:
            if isinstance(stmt, ast.If):
                if not self._only_reports(stmt):
                    return False
            elif isinstance(stmt, ast.FunctionDef):
                # XLA102's port of a log line: `def log_step(...): print(...)` run by
                # `xm.add_step_closure(log_step, ...)`, which reports too.
                if not self._block_only_reports(stmt.body):
                    return False
            elif not (
                isinstance(stmt, ast.Pass)
                or (isinstance(stmt, ast.Expr) and (self._reports(stmt.value) or _builds_text(stmt.value)))
                or (isinstance(stmt, (ast.Assign, ast.AugAssign)) and _is_text(stmt.value) and _names_only(stmt))
            ):
                return False
        return True

    def _reports(self, node: ast.expr) -> bool:
        """``print(...)``, ``warnings.warn(...)``, ``xm.master_print(...)``, ``logger.warning(...)``."""
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if self.ctx.semantic.call_name(node) in _REPORTING_CALLS or (isinstance(func, ast.Name) and func.id == "print"):
            return True
        receiver = (dotted_name(func.value) or "") if isinstance(func, ast.Attribute) else ""
        return method_name(node) in _LOG_METHODS and "log" in receiver.rsplit(".", 1)[-1].lower()

    def check_conditional(self, node: ast.IfExp) -> None:
        """``"bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else
        "float16"``: a choice made only on the accelerator's capabilities, all True on XLA."""
        if id(node) in self.writer.claimed:
            return
        test = node.test
        operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        names = [self.ctx.semantic.call_name(o) if isinstance(o, ast.Call) else None for o in operands]
        if not (all(n in CAPABILITIES for n in names) and any(n in IS_AVAILABLE for n in names)):
            return
        if _chooses_a_backend(node):
            return  # `"nccl" if torch.cuda.is_available() else "gloo"`: the process group's finding
        if self.tensor_types.is_selection(node) or flag_set_by(operands[0]) is not None:
            return  # a tensor type, a flag (`True if ... else False`): judged with their uses
        # The bfloat16 XLA computes in is the explanation's: the message names the choice.
        message = (
            f"`{self.writer.short(test)}` is False on XLA: the script would take `{self.writer.short(node.orelse, 20)}`"
        )
        fix = self.writer.fix(
            "unsafe",
            "Take the accelerator's branch",
            ReplaceExpr(self.ctx.span(node), "{body}", (("body", self.ctx.span(node.body)),)),
        )
        self.writer.report(test, message, fix)

    def _conditions_reading(self, flag: str) -> list[ast.If | ast.IfExp]:
        found = []
        for node in self.ctx.semantic.nodes_of(ast.If, ast.IfExp):
            if any(
                isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load) and dotted_name(n) == flag
                for n in ast.walk(node.test)
            ):
                found.append(node)
        return found


def _is_text(node: ast.AST | None) -> bool:
    """A string, an f-string, or strings joined with ``+``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_text(node.left) and _is_text(node.right)
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _names_only(stmt: ast.Assign | ast.AugAssign) -> bool:
    """``msg = "..."``, ``line += "..."``: text kept in a variable. Not ``kwargs["ALLOW_TF32"]
    = "False"`` or ``os.environ["X"] = "1"``: a setting, which changes what runs."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return all(isinstance(target, ast.Name) for target in targets)


def _builds_text(node: ast.expr) -> bool:
    """``parts.append("max mem: {memory:.0f}")``: adds text to a log line being built."""
    return (
        isinstance(node, ast.Call)
        and method_name(node) in ("append", "extend", "insert")
        and bool(node.args)
        and _is_text(node.args[-1])
    )


def _chooses_a_backend(condition: ast.If | ast.IfExp) -> bool:
    """``"nccl" if torch.cuda.is_available() else "gloo"``: reported, and fixed, where the
    backend is passed to ``init_process_group``."""
    if not isinstance(condition, ast.IfExp):
        return False
    return any((string_value(b) or "").lower() in CUDA_BACKENDS for b in (condition.body, condition.orelse))


# float16 mixed precision is CUDA's: on a TPU accelerate raises "fp16 mixed precision is
# not supported on 'xla'" (accelerate 1.x, `Accelerator.__init__`), and XLA computes in
# bfloat16. What a CUDA test turns on as float16 stays off on XLA.
_FLOAT16_KEYWORDS = frozenset({"fp16", "fp16_full_eval", "half"})
_FLOAT16_VALUES = frozenset({"torch.float16", "torch.half", "float16", "fp16", "half"})


def _chooses_float16(call: ast.Call, test_of: ast.If | ast.IfExp | None) -> bool:
    """``TrainingArguments(fp16=torch.cuda.is_available())`` or ``torch.float16 if
    torch.cuda.is_available() else torch.float32``: the value is False (float32) on XLA,
    which is what runs there; treating the test as True would turn on float16."""
    if test_of is None:
        holder = parent(call)
        return isinstance(holder, ast.keyword) and holder.arg in _FLOAT16_KEYWORDS
    if not isinstance(test_of, ast.IfExp) or test_of.test is not call:
        return False
    chosen = test_of.body
    return (dotted_name(chosen) or string_value(chosen) or "").lower() in _FLOAT16_VALUES


# XLA104's examples of this part (the rule runs them as its own: tests/test_rule_examples.py).
VALID = [
    # A test that only builds the text of a log line, and one that only prints: no port
    # site (porting the first alone would leave `{memory}` unfilled: KeyError).
    Valid(
        """
        import torch
        parts = ["step {i}"]
        if torch.cuda.is_available():
            parts.append("max mem: {memory:.0f}")
        fmt = " ".join(parts)
        if torch.cuda.is_available():
            print(fmt.format(i=0, memory=0))
        else:
            print(fmt.format(i=0))
        """
    ),
    # float16 where CUDA is: False on XLA keeps float32, which runs there (on a TPU,
    # `fp16=True` raises in accelerate: "fp16 mixed precision is not supported on 'xla'").
    Valid(
        """
        import torch
        from transformers import TrainingArguments
        args = TrainingArguments("out", fp16=torch.cuda.is_available())
        dtype = torch.float16 if torch.cuda.is_available() else torch.float32
        """
    ),
]
INVALID = [
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
        batch = batch.to(args.device)
        """,
        count=3,
    ),
    # Outside a device choice: what the script does on an accelerator must happen on XLA.
    Invalid(
        """
        import torch
        assert torch.cuda.is_available(), "needs a GPU"
        if torch.cuda.is_available():
            torch.manual_seed(0)
        dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
        pin = torch.cuda.is_available()
        """,
        unsafe_fixed="""
        import torch
        torch.manual_seed(0)
        dtype = "bfloat16"
        pin = True
        """,
        count=4,
    ),
    # A guard of CUDA-only code keeps its test (no fix, the line named); a test that guards
    # nothing CUDA-only is rewritten with its value: `not True or not wide` is `not wide`.
    Invalid(
        """
        import torch
        def flash_ok(flash):
            if not torch.cuda.is_available() or not flash:
                return False
            return torch.cuda.get_device_properties(0).major >= 8
        def width(wide):
            if not torch.cuda.is_available() or not wide:
                return 4
            return 8
        """,
        unsafe_fixed="""
        import torch
        def flash_ok(flash):
            if not torch.cuda.is_available() or not flash:
                return False
            return torch.cuda.get_device_properties(0).major >= 8
        def width(wide):
            if not wide:
                return 4
            return 8
        """,
        count=3,
    ),
    # A seed under the test goes before it, where it runs on XLA; the test goes with it.
    Invalid(
        """
        import torch
        def setup(seed):
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(seed)
        """,
        fixed="""
        import torch
        import torch_xla

        def setup(seed):
            torch_xla.manual_seed(seed)
        """,
        count=1,
    ),
    # A later unconditional XLA device decides the device (the CUDA one is still ported).
    Invalid(
        """
        import torch
        import torch_xla.core.xla_model as xm
        if torch.cuda.is_available():
            device = torch.device("cuda")
        device = xm.xla_device()
        """,
        fixed="""
        import torch
        import torch_xla
        import torch_xla.core.xla_model as xm

        if torch.cuda.is_available():
            device = torch_xla.device()
        device = xm.xla_device()
        """,
        count=1,
    ),
]


def _subject(message: str) -> str:
    """What a message is about: its first quoted code (```use_cuda```, ```torch.cuda.is_available()```)."""
    return message.split(" is False", 1)[0].split(", from", 1)[0]
