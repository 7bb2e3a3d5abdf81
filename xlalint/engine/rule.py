"""The rule API.

A rule is a class with a code, a name, documentation, options, VALID and INVALID
examples, and ``visit_<NodeType>`` methods that the engine calls during its single
walk of the module's `ast`. A rule only *finds*: it calls ``self.report(node, ...)``
with an optional :class:`~xlalint.model.Fix` built from fix operations; the
fixers carry those out later, on libcst, only when a file is being fixed.

Example::

    class CudaSynchronize(Rule):
        code = "XLA999"
        name = "cuda-synchronize"
        summary = "`torch.cuda.synchronize()` in an XLA script"
        explanation = "Why it is wrong, what to do instead (markdown)."
        fix_availability = "safe"
        VALID = [Valid("import torch_xla.core.xla_model as xm\\nxm.wait_device_ops()")]
        INVALID = [Invalid("import torch\\ntorch.cuda.synchronize()", fixed=...)]

        def visit_Call(self, node):
            if self.ctx.semantic.is_call_to(node, "torch.cuda.synchronize"):
                self.report(node, fix=...)
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from xlalint.analysis.semantic import parent
from xlalint.engine.context import Context
from xlalint.engine.noqa import Suppressions
from xlalint.model import Applicability, Finding, Fix, Import, Operation, Span


@dataclass(frozen=True)
class Valid:
    """Code the rule must not flag."""

    code: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", textwrap.dedent(self.code).lstrip("\n"))


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag.

    ``fixed``: the code after ``xlalint fix`` (safe fixes only) restricted to this
    rule, or None when the safe fix changes nothing. ``unsafe_fixed``: after
    ``fix --unsafe-fixes``. ``count``: how many findings (None: at least one).
    ``options``: per-rule options for this example; ``target_version`` likewise.
    """

    code: str
    fixed: str | None = None
    unsafe_fixed: str | None = None
    count: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    target_version: str | None = None

    def __post_init__(self) -> None:
        for name in ("code", "fixed", "unsafe_fixed"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, textwrap.dedent(value).lstrip("\n"))


@dataclass(frozen=True)
class Option:
    """A rule option: its default (which gives its type), help, and for numbers the
    bounds a value must be within (``Option(512, "...", min=1)``)."""

    default: Any
    help: str
    min: float | None = None
    max: float | None = None

    def validate(self, key: str, value: Any) -> Any:
        expected = type(self.default)
        if (expected is int and isinstance(value, bool)) or not isinstance(value, expected):
            raise ValueError(f"option `{key}` must be {expected.__name__}, got {value!r}")
        if self.min is not None and value < self.min:
            raise ValueError(f"option `{key}` must be at least {self.min}, got {value!r}")
        if self.max is not None and value > self.max:
            raise ValueError(f"option `{key}` must be at most {self.max}, got {value!r}")
        return value


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    #: One line: what is flagged. Also the default message of a finding.
    summary: ClassVar[str]
    #: Markdown: why it matters, what to do, the fix. Shown by ``xlalint rule``.
    explanation: ClassVar[str]
    fix_availability: ClassVar[Literal["safe", "unsafe", "sometimes", "none"]] = "none"
    options: ClassVar[dict[str, Option]] = {}
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []
    #: What the rule reports does not depend on whether the module imports torch_xla
    #: (nor does any analysis it asks): the engine does not run it again on the ported
    #: module for the findings after the port (``engine.lint``). Held to on every
    #: fixture by tests/test_after_port.py.
    same_after_port: ClassVar[bool] = False

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.findings: list[Finding] = []
        self.option_values = ctx.settings.rule_options(self.code, self.options)
        #: Node types whose ``visit_`` the walk need not call in this module (``begin``
        #: may fill it, e.g. when the module imports nothing the visits look for).
        self.skipped_visits: set[type] = set()

    # -- hooks ------------------------------------------------------------------
    def begin(self) -> None:
        """Called once before the walk."""

    def finish(self) -> None:
        """Called once after the walk."""

    def after_suppression(self, suppressions: Suppressions, enabled: frozenset[str]) -> None:
        """Called once the other rules' findings went through the ``# noqa`` comments
        (``suppressions.used`` says which hid one), with the codes checked here. For a
        rule about the comments themselves (XLA100); its findings are not suppressed again."""

    def release(self) -> None:
        """Let go of the context and what the rule built, once its findings are taken: a
        rule and its helpers refer to each other, a cycle that would keep the module's
        tree for the cyclic collector (see ``Context.release``)."""
        self.__dict__.clear()

    # -- helpers for subclasses ---------------------------------------------------
    def option(self, key: str) -> Any:
        return self.option_values[key]

    def report(
        self,
        node: ast.AST,
        message: str | None = None,
        fix: Fix | None = None,
        *,
        span: Span | None = None,
        fix_withheld: str | None = None,
    ) -> None:
        """Report ``node``; a compound statement is reported at its header.
        ``fix_withheld``: why the rule offers no fix where it usually does (shown as the
        fix loop's withdrawals are: ``note: ... fix <reason>``)."""
        if span is None:
            span = self.ctx.header_span(node) if _is_compound(node) else self.ctx.span(node)
        self.findings.append(
            Finding(
                code=self.code,
                name=self.name,
                message=message or self.summary,
                path=self.ctx.path,
                span=span,
                fix=fix,
                noqa_row=span.line,
                noqa_lines=_noqa_lines(self.ctx, node, span),
                fix_withheld=fix_withheld,
            )
        )

    @staticmethod
    def fix(
        applicability: Applicability,
        message: str,
        *operations: Operation,
        imports: tuple[Import, ...] = (),
        unused_imports: tuple[Import, ...] = (),
    ) -> Fix:
        return Fix(
            applicability,
            message,
            tuple(operations),
            tuple(dict.fromkeys(imports)),
            tuple(dict.fromkeys(unused_imports)),
        )


_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.If,
    ast.With,
    ast.AsyncWith,
    ast.Try,
)


def _is_compound(node: ast.AST) -> bool:
    return isinstance(node, _COMPOUND)


def _noqa_lines(ctx: Context, node: ast.AST, span: Span) -> tuple[int, ...]:
    """The reported lines, and the last line of the statement (or header) that holds the node."""
    stmt: ast.AST | None = node
    while stmt is not None and not isinstance(stmt, ast.stmt):
        stmt = parent(stmt)
    if stmt is None:
        last = span.end_line
    elif isinstance(stmt, _COMPOUND):
        last = _header_end_line(ctx, stmt)
    else:
        last = stmt.end_lineno or stmt.lineno
    if span.line == span.end_line == last:  # most findings: one line, one statement
        return (last,)
    return tuple(sorted({span.line, span.end_line, last}))


def _header_end_line(ctx: Context, stmt: ast.stmt) -> int:
    """The line of the colon that ends a compound statement's header, which may come
    after the header's last expression (``for x in (\n    y\n):  # noqa``)."""
    header = ctx.header_span(stmt)
    last: ast.AST | None = None
    if isinstance(stmt, (ast.With, ast.AsyncWith)) and stmt.items:
        last = stmt.items[-1].optional_vars or stmt.items[-1].context_expr
    elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.If)):
        last = stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) else stmt.test
    if last is None:
        return header.end_line
    end = Span.of(last, ctx.lines)
    line, col = end.end_line, end.end_col
    while line <= len(ctx.lines):
        for char in ctx.lines[line - 1][col:]:
            if char == ":":
                return line
            if char == "#":
                break
            if char not in " \t\f)],\\":
                return header.end_line
        line, col = line + 1, 0
    return header.end_line
