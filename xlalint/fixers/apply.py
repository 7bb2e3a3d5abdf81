"""Carrying out fix operations on a libcst tree.

This is the only place the fix path parses libcst, and it is reached only for files
that get a fix. Each operation names its target by the span of an `ast` node; we
find the libcst node at that span (``NodeIndex.at``), rewrite it (``rewrites``), add
the imports the fixes need in sorted place (``imports``), and split the calls the
fixes made longer than the project's line length (``layout``).

Several fixes are applied in one pass when the nodes they replace do not overlap;
the rest wait for the next pass of the fix loop.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left, bisect_right, insort
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState  # to print a node at its indentation

from xlalint.fixers.comment_edits import apply_comment_fixes, is_comment_fix
from xlalint.fixers.imports import add_imports
from xlalint.fixers.layout import Written, wrap_long_lines
from xlalint.fixers.node_index import FixError, NodeIndex
from xlalint.fixers.rewrites import (
    Statement,
    add_parameter,
    append_to_body,
    drop_with_items,
    has_no_effects,
    joined_lines,
    parse_expression,
    parse_statements,
    remove_keyword,
    set_keyword,
    unwrap_with,
)
from xlalint.model import (
    AddParameter,
    AppendToBody,
    Fix,
    Import,
    InsertStatement,
    MoveStatement,
    Operation,
    RemoveKeyword,
    RemoveStatement,
    ReplaceExpr,
    SetKeyword,
    Span,
    UnwrapWith,
    split_lines,
)

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
    # `with` statements and the positions of the items they lose (all: the body
    # replaces the statement).
    unwrap: dict[cst.With, set[int]] = field(default_factory=lambda: defaultdict(set))
    # The spans the fixes of this pass rewrite: disjoint, sorted by start.
    claimed: list[Span] = field(default_factory=list)
    # The nodes on the way from the module to every node rewritten: the rewrite
    # descends only into these, so its cost follows the fixes, not the file.
    ancestors: set[cst.CSTNode] = field(default_factory=set)


@dataclass
class _Touch:
    """A node a fix rewrites, and whether it is taken out of its block."""

    node: cst.CSTNode
    removed: bool = False


class _Rewriter(cst.CSTTransformer):
    """Carries out a plan. A block its removals empty gets ``pass``, unless the block is
    the body of an ``if`` that then does nothing (no ``else``, a test without effects):
    that ``if`` goes too, and an ``else`` left with nothing to do is dropped."""

    def __init__(self, plan: _Plan):
        super().__init__()
        self.plan = plan
        # The `pass` lines put in blocks this rewrite emptied (never one the user wrote).
        self.fillers: set[cst.SimpleStatementLine] = set()
        # Stand-ins for removed statements (and for the closing comments of an unwrapped
        # `with` body): the block that holds one drops it and gives its lines to the
        # statement that follows, or keeps them at its end.
        self.stand_ins: set[cst.SimpleStatementLine] = set()
        # `elif` clauses: an `if` in another's `orelse`, not a statement of a block.
        self.elifs: set[cst.If] = set()
        # The statements the fixes insert (a `def` among them is set off by blank lines).
        self.inserted: set[cst.CSTNode] = {s for group in (*plan.before.values(), *plan.after.values()) for s in group}
        #: The code the fixes wrote, and the original node each piece stands for (None:
        #: inserted), for the layout step (``layout.wrap_long_lines``).
        self.written: list[tuple[list[cst.CSTNode], cst.CSTNode | None]] = []
        # Where each written node is in ``written``: a block that sets one off by blank
        # lines makes a new node of it.
        self._written_at: dict[cst.CSTNode, tuple[list[cst.CSTNode], int]] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node not in self.plan.ancestors:
            return False
        if isinstance(node, cst.If) and isinstance(node.orelse, cst.If):
            self.elifs.add(node.orelse)
        return True

    def _wrote(self, nodes: Sequence[cst.CSTNode], original: cst.CSTNode | None) -> None:
        if not nodes:
            return
        group = list(nodes)
        self.written.append((group, original))
        for position, node in enumerate(group):
            self._written_at[node] = (group, position)

    def _renewed(self, old: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
        """``new``, which replaces ``old`` in its block: written if ``old`` was."""
        where = self._written_at.pop(old, None)
        if where is not None:
            group, position = where
            group[position] = new
            self._written_at[new] = where
        return new

    def written_regions(self, index: NodeIndex) -> list[Written]:
        """What the fixes wrote, with the lines of the source it replaced."""
        regions = []
        for nodes, original in self.written:
            span = index.spans.get(original) if original is not None else None
            regions.append(Written(nodes, (span.line, span.end_line) if span is not None else None))
        return regions

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        node = self._left(original_node, updated_node)
        rewritten = original_node in self.plan.replace or original_node in self.plan.unwrap
        if rewritten and not isinstance(original_node, _STATEMENT) and isinstance(node, cst.CSTNode):
            self._wrote([node], original_node)
        return node

    def _left(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        plan = self.plan
        node: cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel = updated_node
        for rewrite in plan.replace.get(original_node, ()):
            node = rewrite(node)
        replacement: list[Statement] | None = None
        if original_node in plan.unwrap and isinstance(node, cst.With):
            dropped = plan.unwrap[original_node]
            if len(dropped) < len(node.items):
                node = drop_with_items(node, dropped)
            else:
                replacement, footer = unwrap_with(node)
                if footer:
                    # The body's closing comments follow its statements: above the next
                    # statement of the block, or at its end (as a removed `if`'s do).
                    replacement.append(self._carrier(footer))
        if isinstance(node, (cst.If, cst.For, cst.While, cst.Try, cst.TryStar)):
            node = self._without_emptied_else(node)
        collapse = isinstance(node, cst.If) and self._does_nothing(node)
        if collapse and original_node in self.elifs:
            return cst.RemoveFromParent()  # the `elif` clause goes: its `if` has no `orelse` now
        if isinstance(original_node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            before = plan.before.get(original_node, [])
            if before and before[0] not in plan.moved:
                # The blank lines that separate the statement from what precedes it now
                # separate the inserted code (a new `def` wants its two blank lines).
                blank = [line for line in original_node.leading_lines if line.comment is None]
                before = [before[0].with_changes(leading_lines=blank), *before[1:]]
                self.inserted.add(before[0])
            after = plan.after.get(original_node, [])
            if original_node in plan.remove:
                # Comment lines above a removed statement are the user's and stay (as ruff
                # keeps them), and so does the blank line that set it off; a moved
                # statement takes its own along.
                moved = original_node in plan.moved
                keep = [] if moved or not original_node.leading_lines else [self._stand_in(original_node)]
            elif collapse:
                keep = [self._stand_in(node)]
            else:
                keep = replacement if replacement is not None else [node]
            rewritten = original_node in plan.replace or original_node in plan.unwrap
            if rewritten and not (original_node in plan.remove or collapse):
                self._wrote(keep, original_node)
            # A moved statement is the user's code as it was: not written.
            self._wrote([s for s in before if s not in plan.moved], None)
            self._wrote([s for s in after if s not in plan.moved], None)
            if before or after or not keep or replacement is not None or collapse or original_node in plan.remove:
                if not (before or after or keep):
                    return cst.RemoveFromParent()
                return cst.FlattenSentinel([*before, *keep, *after])
        if isinstance(node, (cst.IndentedBlock, cst.Module)) and self.stand_ins:
            node = self._without_stand_ins(node)
        if isinstance(node, (cst.IndentedBlock, cst.Module)):
            node = self._defs_set_off(node)
        if isinstance(node, cst.IndentedBlock) and not node.body:
            return node.with_changes(body=[self._filler()])
        return node

    def _defs_set_off(self, block: cst.IndentedBlock | cst.Module) -> cst.IndentedBlock | cst.Module:
        """``block`` with blank lines around each ``def``/``class`` a fix inserted, as
        black and ``ruff format`` put them: two at module level, one in a block (none
        before the first statement of a block)."""
        body = list(block.body)
        wanted = 2 if isinstance(block, cst.Module) else 1
        changed = False
        for i, statement in enumerate(body):
            if statement not in self.inserted or not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                continue
            for j in (i, i + 1) if i else (i + 1,):
                if j == len(body):
                    continue
                lines = list(body[j].leading_lines)
                blank = next((n for n, line in enumerate(lines) if line.comment is not None), len(lines))
                if blank < wanted:
                    body[j] = self._renewed(
                        body[j],
                        body[j].with_changes(leading_lines=[cst.EmptyLine(indent=False)] * (wanted - blank) + lines),
                    )
                    changed = True
        return block.with_changes(body=body) if changed else block

    def _filler(self, leading_lines: Sequence[cst.EmptyLine] = ()) -> cst.SimpleStatementLine:
        filler = cst.SimpleStatementLine([cst.Pass()], leading_lines=leading_lines)
        self.fillers.add(filler)
        return filler

    def _emptied(self, block: cst.BaseSuite) -> bool:
        """Whether this rewrite took every statement out of ``block``."""
        return isinstance(block, cst.IndentedBlock) and len(block.body) == 1 and block.body[0] in self.fillers

    def _does_nothing(self, statement: cst.If) -> bool:
        return statement.orelse is None and self._emptied(statement.body) and has_no_effects(statement.test)

    def _without_emptied_else(self, statement: cst.CSTNode) -> cst.CSTNode:
        orelse = getattr(statement, "orelse", None)
        if isinstance(orelse, cst.Else) and self._emptied(orelse.body):
            return statement.with_changes(orelse=None)
        return statement

    def _stand_in(self, statement: cst.BaseStatement) -> cst.SimpleStatementLine:
        """What stands for a removed statement (an ``if`` emptied by the fixes) until its
        block drops it: the lines above it, comments and blank lines, which stay where it
        was. What was inside it (its header's comment, its body's) goes with it."""
        return self._carrier(list(statement.leading_lines))

    def _carrier(self, lines: Sequence[cst.EmptyLine]) -> cst.SimpleStatementLine:
        """A placeholder statement whose ``lines`` its block gives to the statement that
        follows it, or keeps at its end (``_without_stand_ins``)."""
        stand_in = cst.SimpleStatementLine([cst.Pass()], leading_lines=lines)
        self.stand_ins.add(stand_in)
        return stand_in

    def _without_stand_ins(self, block: cst.IndentedBlock | cst.Module) -> cst.IndentedBlock | cst.Module:
        if not any(statement in self.stand_ins for statement in block.body):
            return block
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []  # the lines of the stand-ins, for what follows
        for statement in block.body:
            if statement in self.stand_ins:
                carried = joined_lines(carried, statement.leading_lines)
                continue
            if carried:
                statement = self._renewed(
                    statement, statement.with_changes(leading_lines=joined_lines(carried, statement.leading_lines))
                )
                carried = []
            body.append(statement)
        # Blank lines end no block: at its end only the comments stay.
        while carried and carried[-1].comment is None:
            carried.pop()
        if body or isinstance(block, cst.Module):
            return block.with_changes(body=body, footer=[*carried, *block.footer])
        return block.with_changes(body=[self._filler([line for line in carried if line.comment is not None])])


_STATEMENT = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


def _plan_operation(
    index: NodeIndex, op: Operation, plan: _Plan, claims: list[Span], touched: list[_Touch]
) -> Callable[[], None]:
    """Resolve ``op``; return the step that records it in ``plan`` (run only if the
    whole fix resolves and claims nothing another fix of this pass claimed)."""
    if isinstance(op, ReplaceExpr):
        target = index.at(op.span, cst.BaseExpression)
        code = index.render(op.template, op.parts)
        new = parse_expression(code, target)
        claims.append(index.spans[target])
        touched.append(_Touch(target))
        return lambda: plan.replace[target].append(lambda _node: new)
    if isinstance(op, SetKeyword):
        call = index.at(op.span, cst.Call)
        claims.append(index.spans[call])
        touched.append(_Touch(call))
        return lambda: plan.replace[call].append(lambda node: set_keyword(node, op.name, op.value, op.only_if_missing))
    if isinstance(op, RemoveKeyword):
        call = index.at(op.span, cst.Call)
        claims.append(index.spans[call])
        touched.append(_Touch(call))
        return lambda: plan.replace[call].append(lambda node: remove_keyword(node, op.name))
    if isinstance(op, AddParameter):
        func = index.at(op.span, cst.FunctionDef)
        claims.append(index.spans[func.params])
        touched.append(_Touch(func))
        return lambda: plan.replace[func].append(lambda node: add_parameter(node, op.name))
    if isinstance(op, InsertStatement):
        stmt = index.at(op.span, _STATEMENT)
        statements = parse_statements(index.render(op.code, op.parts))
        where = plan.before if op.where == "before" else plan.after
        touched.append(_Touch(stmt))
        return lambda: where[stmt].extend(statements)
    if isinstance(op, RemoveStatement):
        stmt = index.at(op.span, _STATEMENT)
        claims.append(index.spans[stmt])
        touched.append(_Touch(stmt, removed=True))
        return lambda: plan.remove.add(stmt)
    if isinstance(op, MoveStatement):
        stmt = index.at(op.span, _STATEMENT)
        anchor = index.at(op.anchor, _STATEMENT)
        if stmt is anchor:
            raise FixError("a statement cannot move next to itself")
        claims.append(index.spans[stmt])
        touched.extend((_Touch(stmt, removed=True), _Touch(anchor)))
        where = plan.before if op.where == "before" else plan.after

        def record() -> None:
            plan.remove.add(stmt)
            plan.moved.add(stmt)
            where[anchor].append(stmt)

        return record
    if isinstance(op, UnwrapWith):
        item = index.at(op.span, cst.WithItem)
        statement = index.at(index.spans[item], cst.With)
        if statement.asynchronous is not None:
            raise FixError("an `async with` is not unwrapped")
        position = [candidate is item for candidate in statement.items].index(True)
        claims.append(_header_span(index, statement))
        # Its block is what changes: the body's closing comments go to the next statement.
        touched.append(_Touch(statement, removed=True))
        return lambda: plan.unwrap[statement].add(position)
    if isinstance(op, AppendToBody):
        compound = index.at(op.span, cst.BaseCompoundStatement)
        parse_statements(op.code)  # fail now, not mid-transform, on bad code
        touched.append(_Touch(compound))
        return lambda: plan.replace[compound].append(lambda node: append_to_body(node, op.code))
    raise FixError(f"unknown operation {op!r}")


def _header_span(index: NodeIndex, statement: cst.With) -> Span:
    """From ``with`` to the end of its last item (or its ``)``): what an unwrap
    rewrites. Fixes inside the body do not clash with it; they are applied first."""
    last: cst.CSTNode = statement.rpar if isinstance(statement.rpar, cst.RightParen) else statement.items[-1]
    start, end = index.spans[statement], index.spans[last]
    return Span(start.line, start.col, end.end_line, end.end_col)


_PLAN_ERRORS = (FixError, cst.ParserSyntaxError, KeyError, IndexError, ValueError)


def _plan_fix(index: NodeIndex, fix: Fix, plan: _Plan) -> list[_Touch] | None:
    """Record ``fix`` in ``plan``; None (and nothing recorded) if it cannot be carried
    out here or overlaps what the plan already claims."""
    claims: list[Span] = []
    touched: list[_Touch] = []
    try:
        steps = [_plan_operation(index, op, plan, claims, touched) for op in fix.operations]
    except _PLAN_ERRORS:
        return None
    if any(_clashes(claim, plan.claimed) for claim in claims):
        return None
    for step in steps:
        step()
    for claim in _merged(claims):
        insort(plan.claimed, claim)
    for touch in touched:
        plan.ancestors.update(index.paths[touch.node])
    return touched


def _conflict(a: Span, b: Span) -> bool:
    return a.overlaps(b) or a.contains(b) or b.contains(a)


def _clashes(span: Span, claimed: list[Span]) -> bool:
    """Whether ``span`` overlaps, holds or lies in one of the disjoint sorted ``claimed``:
    only the neighbours of its place in the order can."""
    i = bisect_left(claimed, span)
    return any(_conflict(span, claimed[j]) for j in range(max(i - 2, 0), min(i + 2, len(claimed))))


def _merged(spans: list[Span]) -> list[Span]:
    """``spans`` with those that overlap or nest joined (one fix may claim a call and
    a part of it), so that the claimed spans stay disjoint."""
    out: list[Span] = []
    for span in sorted(spans):
        if out and _conflict(out[-1], span):
            last = out[-1]
            out[-1] = Span(last.line, last.col, *max((last.end_line, last.end_col), (span.end_line, span.end_col)))
        else:
            out.append(span)
    return out


class BeyondRewriter(Exception):
    """Code Python parses that libcst's parser gives up on (a construct too deep or too
    long for it, such as 5,000 implicitly concatenated strings): nothing can be fixed."""


def apply_fixes(source: str, fixes: Sequence[Fix], line_length: int | None = None) -> tuple[str, list[Fix]]:
    """Apply as many of ``fixes`` as do not overlap; return the new code and the
    fixes applied. A fix whose operations cannot all be carried out is skipped. With a
    ``line_length``, the calls on lines the fixes made longer than that are split."""
    source, edited = apply_comment_fixes(source, fixes)
    fixes = [fix for fix in fixes if not is_comment_fix(fix)]
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise BeyondRewriter(str(exc)) from None
    index = NodeIndex.of(module)
    plan = _Plan()
    applied = [fix for fix in fixes if _plan_fix(index, fix, plan) is not None]
    if not applied:
        return source, edited
    rewriter = _Rewriter(plan)
    new_module = index.module.visit(rewriter)
    if line_length is not None:
        written = rewriter.written_regions(index)
        # The old tree and its positions go before the new one's are computed.
        del index, module, plan, rewriter
        new_module = wrap_long_lines(source, new_module, written, line_length)
    new_module = add_imports(
        new_module,
        {imp for fix in applied for imp in fix.imports},
        {imp for fix in applied for imp in fix.unused_imports},
    )
    return new_module.code, edited + applied


@dataclass(frozen=True)
class TextEdit:
    content: str
    start: tuple[int, int]  # 1-based row and column, as ruff's JSON
    end: tuple[int, int]


def text_edits(before: str, after: str) -> list[TextEdit]:
    """Small edits that turn ``before`` into ``after``: changed lines, narrowed to the
    changed characters (pieces closer than a few characters are merged). Linear in the
    text: difflib's matcher, quadratic where lines repeat (generated or templated code:
    a fix-all of 4,000 such lines spent 30 s here), only aligns what is left between
    the common first and last lines when that is small, and a linear alignment the rest."""
    old, new = split_lines(before, keepends=True), split_lines(after, keepends=True)
    edits: list[TextEdit] = []
    for i1, i2, j1, j2 in _changed_lines(old, new):
        a, b = "".join(old[i1:i2]), "".join(new[j1:j2])
        for a1, a2, b1, b2 in _changed_characters(a, b):
            edits.append(TextEdit(b[b1:b2], _position(old[i1:i2], a1, i1), _position(old[i1:i2], a2, i1)))
    return edits


# Above these many pairs (lines, characters), difflib's matcher gives way to linear work.
_MATCHER_LINE_PAIRS = 40_000
_MATCHER_CHAR_PAIRS = 250_000
# How far past a changed line the linear alignment looks for the lines to agree again.
_RESYNC_WINDOW = 40


def _changed_lines(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """The changed blocks ``(i1, i2, j1, j2)``: ``old[i1:i2]`` becomes ``new[j1:j2]``."""
    start, shorter = 0, min(len(old), len(new))
    while start < shorter and old[start] == new[start]:
        start += 1
    end = 0
    while end < shorter - start and old[-1 - end] == new[-1 - end]:
        end += 1
    a, b = old[start : len(old) - end], new[start : len(new) - end]
    if not a and not b:
        return []
    if len(a) * len(b) <= _MATCHER_LINE_PAIRS:
        blocks = [
            (i1, i2, j1, j2)
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
            if tag != "equal"
        ]
    else:
        blocks = _aligned(a, b)
    return [(i1 + start, i2 + start, j1 + start, j2 + start) for i1, i2, j1, j2 in blocks]


def _aligned(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """The changed blocks of ``a`` into ``b``, in one pass: equal lines are passed
    over, and at a difference the nearest point (fewest lines on both sides) where two
    lines in a row agree again ends the block. Where no such point is near, the rest
    is one block: always correct, narrow where the changes are local (as a fix's are)."""
    blocks = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            i, j = i + 1, j + 1
            continue
        again = _agree_again(a, b, i, j)
        if again is None:
            break
        blocks.append((i, again[0], j, again[1]))
        i, j = again
    if i < len(a) or j < len(b):
        blocks.append((i, len(a), j, len(b)))
    return blocks


def _agree_again(a: list[str], b: list[str], i: int, j: int) -> tuple[int, int] | None:
    for distance in range(1, 2 * _RESYNC_WINDOW + 1):
        for di in range(max(0, distance - _RESYNC_WINDOW), min(distance, _RESYNC_WINDOW) + 1):
            i2, j2 = i + di, j + distance - di
            if i2 >= len(a) or j2 >= len(b) or a[i2] != b[j2]:
                continue
            if i2 + 1 == len(a) or j2 + 1 == len(b) or a[i2 + 1] == b[j2 + 1]:
                return i2, j2
    return None


def _changed_characters(a: str, b: str) -> list[list[int]]:
    """The changed pieces ``[a1, a2, b1, b2]`` of ``a`` into ``b``, pieces closer than
    a few characters merged; past the matcher's size, one piece between the common
    first and last characters."""
    if len(a) * len(b) > _MATCHER_CHAR_PAIRS:
        shorter, start, end = min(len(a), len(b)), 0, 0
        while start < shorter and a[start] == b[start]:
            start += 1
        while end < shorter - start and a[-1 - end] == b[-1 - end]:
            end += 1
        return [[start, len(a) - end, start, len(b) - end]]
    pieces: list[list[int]] = []
    for op, a1, a2, b1, b2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if pieces and a1 - pieces[-1][1] <= 3:
            pieces[-1][1], pieces[-1][3] = a2, b2
        else:
            pieces.append([a1, a2, b1, b2])
    return pieces


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
    return file_edits(source, [fix]).get(fix, [])


def file_edits(source: str, fixes: Sequence[Fix]) -> dict[Fix, list[TextEdit]]:
    """Each fix's own text edits to ``source``, as if it were the only one applied; a
    fix that cannot be carried out maps to ``[]``.

    One libcst parse and one position index serve every fix of the file. A fix's
    rewrite visits only the nodes on the way to what it changes, and its edits come
    from the text of the smallest node that holds all its changes, found in the
    source by its position: the cost of a fix follows its size, not the file's.
    """
    try:
        index = NodeIndex.of(cst.parse_module(source))
    except (cst.ParserSyntaxError, RecursionError):
        return {fix: [] for fix in fixes}
    edits = _EditMaker(source, index)
    out: dict[Fix, list[TextEdit]] = {}
    for fix in fixes:
        if fix in out:
            continue
        if is_comment_fix(fix):
            out[fix] = [
                TextEdit(op.text, (op.span.line, op.span.col + 1), (op.span.end_line, op.span.end_col + 1))
                for op in fix.operations
            ]
            continue
        try:
            out[fix] = edits.of(fix)
        except (*_PLAN_ERRORS, RecursionError):
            out[fix] = []
    return out


class _EditMaker:
    def __init__(self, source: str, index: NodeIndex):
        self.source = source
        self.index = index
        self.line_starts = [0]
        for line in split_lines(source, keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))
        self.import_edits: dict[frozenset[Import], list[TextEdit]] = {}

    def of(self, fix: Fix) -> list[TextEdit]:
        plan = _Plan()
        touched = _plan_fix(self.index, fix, plan)
        if touched is None:
            return []
        if not fix.unused_imports:
            local = self._local_edits(plan, touched)
            if local is not None:
                imports = self._import_edits(frozenset(fix.imports))
                if not _near(local, imports):
                    return sorted(imports + local, key=lambda e: (e.start, e.end))
        new = add_imports(self.index.module.visit(_Rewriter(plan)), set(fix.imports), set(fix.unused_imports))
        return text_edits(self.source, new.code)

    def _import_edits(self, imports: frozenset[Import]) -> list[TextEdit]:
        if not imports:
            return []
        if imports not in self.import_edits:
            new = add_imports(self.index.module, set(imports), set())
            self.import_edits[imports] = text_edits(self.source, new.code)
        return self.import_edits[imports]

    def _local_edits(self, plan: _Plan, touched: list[_Touch]) -> list[TextEdit] | None:
        """The fix's edits to the body, or None where they cannot be found locally."""
        inserted = [s for group in (*plan.before.values(), *plan.after.values()) for s in group]
        if any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) for s in inserted):
            return None  # the blank lines around a new `def` are its block's to set
        paths = [self.index.paths[t.node][:-1] if t.removed else self.index.paths[t.node] for t in touched]
        common: list[cst.CSTNode] = []
        for nodes in zip(*paths):
            if any(n is not nodes[0] for n in nodes):
                break
            common.append(nodes[0])
        if len(common) < 2:
            return None  # the module itself: the whole text
        region = common[-1]
        module = self.index.module
        indents = [
            block.indent if block.indent is not None else module.default_indent
            for block in common[:-1]
            if isinstance(block, cst.IndentedBlock)
        ]
        old = _render([region], indents, module)
        rewriter = _Rewriter(plan)
        result = region.visit(rewriter)
        if rewriter.fillers or rewriter.stand_ins:
            return None  # an emptied block: what it empties may lie outside the region
        if isinstance(result, cst.FlattenSentinel):
            new_nodes = list(result.nodes)
        elif isinstance(result, cst.RemovalSentinel):
            return None
        else:
            new_nodes = [result]
        new = _render(new_nodes, indents, module)
        span = self.index.spans[region]
        start = self.line_starts[span.line - 1] + span.col
        end = self.line_starts[span.end_line - 1] + span.end_col
        at = self.source.rfind(old, max(0, end - len(old)), start + len(old))
        if at < 0 or at > start or at + len(old) < end:
            return None
        row = bisect_right(self.line_starts, at) - 1
        col = at - self.line_starts[row]
        return [
            TextEdit(
                edit.content,
                (edit.start[0] + row, edit.start[1] + (col if edit.start[0] == 1 else 0)),
                (edit.end[0] + row, edit.end[1] + (col if edit.end[0] == 1 else 0)),
            )
            for edit in text_edits(old, new)
        ]


def _render(nodes: Sequence[cst.CSTNode], indents: list[str], module: cst.Module) -> str:
    """The code of ``nodes`` as it stands inside blocks indented by ``indents``."""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens = list(indents)
    for node in nodes:
        node._codegen(state)
    return "".join(state.tokens)


def _near(edits: list[TextEdit], others: list[TextEdit]) -> bool:
    """Whether edits of one list touch or abut the lines of the other's."""
    return any(a.start[0] <= b.end[0] + 1 and b.start[0] <= a.end[0] + 1 for a in edits for b in others)
