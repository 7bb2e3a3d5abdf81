"""Carrying out fix operations on a libcst tree.

This is the only place the fix path parses libcst, and it is reached only for files
that get a fix. Each operation names its target by the span of an `ast` node; we
find the libcst node at that span (``NodeIndex.at``), rewrite, and let
``AddImportsVisitor`` add what the fixes need (it never duplicates an import).

Several fixes are applied in one pass when the nodes they replace do not overlap;
the rest wait for the next pass of the fix loop.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from xlalint.linter.model import (
    AddParameter,
    AppendToBody,
    Fix,
    InsertStatement,
    MoveStatement,
    Operation,
    RemoveKeyword,
    RemoveStatement,
    ReplaceExpr,
    SetKeyword,
    Span,
    split_lines,
)

Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


class FixError(Exception):
    """An operation that cannot be carried out on this tree."""


class NodeIndex:
    """Every node of a module with its span, to find the node an `ast` span names."""

    def __init__(self, wrapper: MetadataWrapper):
        self.module = wrapper.module
        positions = wrapper.resolve(PositionProvider)
        self.spans: dict[cst.CSTNode, Span] = {
            node: Span(r.start.line, r.start.column, r.end.line, r.end.column) for node, r in positions.items()
        }

    def at(self, span: Span, kind: type | tuple[type, ...]) -> cst.CSTNode:
        """The smallest node of ``kind`` whose span contains ``span``."""
        best: tuple[int, int, int, int] | None = None
        found: cst.CSTNode | None = None
        for node, node_span in self.spans.items():
            if not isinstance(node, kind) or not node_span.contains(span):
                continue
            size = (
                node_span.end_line - node_span.line,
                node_span.end_col - node_span.col if node_span.end_line == node_span.line else 10**9,
                -node_span.line,
                -node_span.col,
            )
            if best is None or size < best:
                best, found = size, node
        if found is None:
            raise FixError(f"no {getattr(kind, '__name__', kind)} at {span}")
        return found

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def render(self, template: str, parts: Sequence[tuple[str, Span]]) -> str:
        if not parts:
            return template.replace("{{", "{").replace("}}", "}")
        values = {name: self.code(self.at(span, cst.BaseExpression)).strip() for name, span in parts}
        return template.format(**values)


# --- the rewrites ---------------------------------------------------------------------


def _parse_expression(code: str, like: cst.BaseExpression) -> cst.BaseExpression:
    new = cst.parse_expression(code)
    lpar = getattr(like, "lpar", ())
    if lpar and hasattr(new, "lpar") and not getattr(new, "lpar", ()):
        new = new.with_changes(lpar=lpar, rpar=like.rpar)
    return new


def _parse_statements(code: str) -> list[Statement]:
    return list(cst.parse_module(code.rstrip() + "\n").body)


def set_keyword(call: cst.Call, name: str, value: str, only_if_missing: bool) -> cst.Call:
    new_value = cst.parse_expression(value)
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            if only_if_missing:
                return call
            args[i] = arg.with_changes(value=new_value)
            return call.with_changes(args=args)
    keyword = cst.Arg(
        keyword=cst.Name(name),
        value=new_value,
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    if args:
        last = args[-1]
        if last.comma == cst.MaybeSentinel.DEFAULT or isinstance(last.comma, cst.MaybeSentinel):
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(keyword)
        else:
            # A trailing comma (often a call laid out one argument a line): keep that
            # layout. The new argument takes the last comma (the one before `)`); the
            # last argument takes the whitespace that precedes the arguments.
            inner = (
                args[-2].comma.whitespace_after
                if len(args) > 1 and isinstance(args[-2].comma, cst.Comma)
                else call.whitespace_before_args
            )
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=inner))
            args.append(keyword.with_changes(comma=last.comma))
            return call.with_changes(args=args)
    else:
        args.append(keyword)
    # Keyword arguments must come before ``**kwargs``.
    star_kwargs = [a for a in args if a.star == "**"]
    if star_kwargs and args[-1] is keyword:
        index = args.index(star_kwargs[0])
        args.insert(index, args.pop())
        args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + [
            args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        ]
    return call.with_changes(args=args)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == name)]
    if args and len(args) < len(call.args) and call.args[-1].comma == cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def add_parameter(func: cst.FunctionDef, name: str) -> cst.FunctionDef:
    params = func.params
    if any(p.name.value == name for p in (*params.posonly_params, *params.params)):
        return func
    new = cst.Param(cst.Name(name))
    has_star = isinstance(params.star_arg, (cst.Param, cst.ParamStar))
    if params.params or params.posonly_params or has_star or params.kwonly_params or params.star_kwarg:
        new = new.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    if params.posonly_params:
        return func.with_changes(params=params.with_changes(posonly_params=[new, *params.posonly_params]))
    return func.with_changes(params=params.with_changes(params=[new, *params.params]))


def append_to_body(compound: cst.BaseCompoundStatement, code: str) -> cst.BaseCompoundStatement:
    body = compound.body
    statements = _parse_statements(code)
    if isinstance(body, cst.IndentedBlock):
        return compound.with_changes(body=body.with_changes(body=[*body.body, *statements]))
    # `for x in y: stmt` on one line: turn it into a block.
    small = list(body.body)
    line = cst.SimpleStatementLine(body=[s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for s in small])
    return compound.with_changes(body=cst.IndentedBlock(body=[line, *statements]))


# --- one pass ----------------------------------------------------------------------------


@dataclass
class _Plan:
    # Rewrites of a node, applied in order (one fix may set two keywords of a call).
    replace: dict[cst.CSTNode, list[Callable[[cst.CSTNode], cst.CSTNode]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    before: dict[cst.CSTNode, list[Statement]] = field(default_factory=lambda: defaultdict(list))
    after: dict[cst.CSTNode, list[Statement]] = field(default_factory=lambda: defaultdict(list))
    remove: set[cst.CSTNode] = field(default_factory=set)
    # Statements placed elsewhere as they are, comments and blank lines included.
    moved: set[cst.CSTNode] = field(default_factory=set)
    claimed: list[Span] = field(default_factory=list)


class _Rewriter(cst.CSTTransformer):
    def __init__(self, plan: _Plan):
        super().__init__()
        self.plan = plan

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        plan = self.plan
        node: cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel = updated_node
        for rewrite in plan.replace.get(original_node, ()):
            node = rewrite(node)
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            before = plan.before.get(original_node, [])
            if before and before[0] not in plan.moved:
                # The blank lines that separate the statement from what precedes it now
                # separate the inserted code (a new `def` wants its two blank lines).
                blank = [line for line in original_node.leading_lines if line.comment is None]
                before = [before[0].with_changes(leading_lines=blank), *before[1:]]
            after = plan.after.get(original_node, [])
            keep = [] if original_node in plan.remove else [node]
            if before or after or not keep:
                if not (before or after or keep):
                    return cst.RemoveFromParent()
                return cst.FlattenSentinel([*before, *keep, *after])
        if isinstance(node, cst.IndentedBlock) and not node.body:
            return node.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        return node


def _plan_operation(index: NodeIndex, op: Operation, plan: _Plan, claims: list[Span]) -> Callable[[], None]:
    """Resolve ``op``; return the step that records it in ``plan`` (run only if the
    whole fix resolves and claims nothing another fix of this pass claimed)."""
    if isinstance(op, ReplaceExpr):
        target = index.at(op.span, cst.BaseExpression)
        code = index.render(op.template, op.parts)
        new = _parse_expression(code, target)
        claims.append(index.spans[target])
        return lambda: plan.replace[target].append(lambda _node: new)
    if isinstance(op, SetKeyword):
        call = index.at(op.span, cst.Call)
        claims.append(index.spans[call])
        return lambda: plan.replace[call].append(lambda node: set_keyword(node, op.name, op.value, op.only_if_missing))
    if isinstance(op, RemoveKeyword):
        call = index.at(op.span, cst.Call)
        claims.append(index.spans[call])
        return lambda: plan.replace[call].append(lambda node: remove_keyword(node, op.name))
    if isinstance(op, AddParameter):
        func = index.at(op.span, cst.FunctionDef)
        claims.append(index.spans[func.params])
        return lambda: plan.replace[func].append(lambda node: add_parameter(node, op.name))
    if isinstance(op, InsertStatement):
        stmt = index.at(op.span, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        statements = _parse_statements(index.render(op.code, op.parts))
        where = plan.before if op.where == "before" else plan.after
        return lambda: where[stmt].extend(statements)
    if isinstance(op, RemoveStatement):
        stmt = index.at(op.span, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        claims.append(index.spans[stmt])
        return lambda: plan.remove.add(stmt)
    if isinstance(op, MoveStatement):
        stmt = index.at(op.span, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        anchor = index.at(op.anchor, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        if stmt is anchor:
            raise FixError("a statement cannot move next to itself")
        claims.append(index.spans[stmt])
        where = plan.before if op.where == "before" else plan.after

        def record() -> None:
            plan.remove.add(stmt)
            plan.moved.add(stmt)
            where[anchor].append(stmt)

        return record
    if isinstance(op, AppendToBody):
        compound = index.at(op.span, cst.BaseCompoundStatement)
        _parse_statements(op.code)  # fail now, not mid-transform, on bad code
        return lambda: plan.replace[compound].append(lambda node: append_to_body(node, op.code))
    raise FixError(f"unknown operation {op!r}")


def apply_fixes(source: str, fixes: Sequence[Fix]) -> tuple[str, list[Fix]]:
    """Apply as many of ``fixes`` as do not overlap; return the new code and the
    fixes applied. A fix whose operations cannot all be carried out is skipped."""
    module = cst.parse_module(source)
    index = NodeIndex(MetadataWrapper(module))
    plan = _Plan()
    applied: list[Fix] = []
    for fix in fixes:
        claims: list[Span] = []
        try:
            steps = [_plan_operation(index, op, plan, claims) for op in fix.operations]
        except (FixError, cst.ParserSyntaxError, KeyError, IndexError, ValueError):
            continue
        if any(c.overlaps(o) or c.contains(o) or o.contains(c) for c in claims for o in plan.claimed):
            continue
        for step in steps:
            step()
        plan.claimed.extend(claims)
        applied.append(fix)
    if not applied:
        return source, []
    new_module = index.module.visit(_Rewriter(plan))
    imports = {imp for fix in applied for imp in fix.imports}
    if imports:
        context = CodemodContext()
        for imp in sorted(imports):
            if imp.name:
                AddImportsVisitor.add_needed_import(context, imp.module, imp.name, imp.asname)
            else:
                AddImportsVisitor.add_needed_import(context, imp.module, asname=imp.asname)
        new_module = AddImportsVisitor(context).transform_module(new_module)
    unused = {imp for fix in applied for imp in fix.unused_imports}
    if unused:
        # Scope analysis, on this file only and only because a fix asked for it.
        context = CodemodContext()
        for imp in sorted(unused):
            RemoveImportsVisitor.remove_unused_import(context, imp.module, imp.name, imp.asname)
        new_module = RemoveImportsVisitor(context).transform_module(new_module)
    return new_module.code, applied


@dataclass(frozen=True)
class TextEdit:
    content: str
    start: tuple[int, int]  # 1-based row and column, as ruff's JSON
    end: tuple[int, int]


def text_edits(before: str, after: str) -> list[TextEdit]:
    """Small edits that turn ``before`` into ``after``: changed lines, narrowed to the
    changed characters (pieces closer than a few characters are merged)."""
    old, new = split_lines(before, keepends=True), split_lines(after, keepends=True)
    edits: list[TextEdit] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        a, b = "".join(old[i1:i2]), "".join(new[j1:j2])
        pieces: list[list[int]] = []  # [a_start, a_end, b_start, b_end]
        for op, a1, a2, b1, b2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if op == "equal":
                continue
            if pieces and a1 - pieces[-1][1] <= 3:
                pieces[-1][1], pieces[-1][3] = a2, b2
            else:
                pieces.append([a1, a2, b1, b2])
        for a1, a2, b1, b2 in pieces:
            edits.append(TextEdit(b[b1:b2], _position(old[i1:i2], a1, i1), _position(old[i1:i2], a2, i1)))
    return edits


def _position(block: list[str], offset: int, first_line: int) -> tuple[int, int]:
    """1-based (row, column) of ``offset`` in the lines ``block`` (kept ends), which
    start at 0-based line ``first_line``."""
    row = first_line
    for line in block:
        if offset < len(line) or not line.endswith(("\n", "\r")):
            break
        offset -= len(line)
        row += 1
    return row + 1, offset + 1


def fix_edits(source: str, fix: Fix) -> list[TextEdit]:
    """The text edits one fix makes to ``source`` (for JSON and SARIF output)."""
    try:
        fixed, applied = apply_fixes(source, [fix])
    except cst.ParserSyntaxError:
        return []
    return text_edits(source, fixed) if applied else []
