"""The rewrites of libcst nodes that fix operations make: keywords of a call, a new
parameter, statements appended to a block, a `with` unwrapped, and the blank lines
of removed statements. Pure functions of the nodes they are given."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import libcst as cst
import libcst.matchers as m

Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


def parse_expression(code: str, like: cst.BaseExpression) -> cst.BaseExpression:
    try:
        new = cst.parse_expression(code)
    except cst.ParserSyntaxError:
        # Code taken from inside brackets may span lines (`(x\n .float()\n .cuda())`):
        # it parses in parentheses, the target's own when it has them.
        new = cst.parse_expression(f"({code})")
        if getattr(like, "lpar", ()):
            new = new.with_changes(lpar=(), rpar=())
    lpar = getattr(like, "lpar", ())
    if lpar and hasattr(new, "lpar") and not getattr(new, "lpar", ()):
        new = new.with_changes(lpar=lpar, rpar=like.rpar)
    return new


def parse_statements(code: str) -> list[Statement]:
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
    # Before `**kwargs`: after it is legal too, but keywords first and `**` last is how
    # calls are written (and how a reader looks for them).
    position = next((i for i, arg in enumerate(args) if arg.star == "**"), len(args))
    if position < len(args):
        return _inserted_before(call, position, keyword)
    if args:
        return _appended(call, keyword)
    return call.with_changes(args=[keyword])


def _space_before(call: cst.Call, position: int) -> cst.BaseParenthesizableWhitespace:
    """The whitespace before argument ``position``: after ``(`` or the comma before it."""
    if position == 0:
        return call.whitespace_before_args
    comma = call.args[position - 1].comma
    return comma.whitespace_after if isinstance(comma, cst.Comma) else cst.SimpleWhitespace("")


def _with_space_before(call: cst.Call, position: int, space: cst.BaseParenthesizableWhitespace) -> cst.Call:
    if position == 0:
        return call.with_changes(whitespace_before_args=space)
    args = list(call.args)
    args[position - 1] = args[position - 1].with_changes(
        comma=args[position - 1].comma.with_changes(whitespace_after=space)
    )
    return call.with_changes(args=args)


def _inserted_before(call: cst.Call, position: int, new: cst.Arg) -> cst.Call:
    """``call`` with the argument ``new`` in front of argument ``position``, laid out
    as that one is: on a line of its own when it starts one. The comment that ends the
    line before stays there; the comment lines above that argument stay above it."""
    space = _space_before(call, position)
    if isinstance(space, cst.ParenthesizedWhitespace):
        call = _with_space_before(call, position, space.with_changes(empty_lines=()))
        after = space.with_changes(first_line=cst.TrailingWhitespace())
    else:  # `f(a, **kw)`, `f(**kw)`
        after = space if position else cst.SimpleWhitespace(" ")
    args = list(call.args)
    args.insert(position, new.with_changes(comma=cst.Comma(whitespace_after=after)))
    return call.with_changes(args=args)


def _appended(call: cst.Call, new: cst.Arg) -> cst.Call:
    """``call`` with the argument ``new`` last. In a call laid out on several lines,
    ``new`` goes on a line of its own at the indentation of the last argument, the
    comment that ends the last argument's line stays after it, and ``)`` stays where it
    was; a trailing comma stays."""
    args = list(call.args)
    last = args[-1]
    has_trailing_comma = isinstance(last.comma, cst.Comma)
    # What lies between the last argument (or its comma) and `)`.
    closing = last.comma.whitespace_after if has_trailing_comma else last.whitespace_after_arg
    space = _space_before(call, len(args) - 1)
    if isinstance(space, cst.ParenthesizedWhitespace):
        separator = space.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
        if isinstance(closing, cst.ParenthesizedWhitespace) and closing.first_line.comment is not None:
            separator = separator.with_changes(first_line=closing.first_line)
            closing = closing.with_changes(first_line=cst.TrailingWhitespace())
    else:
        separator = cst.SimpleWhitespace(" ")
    whitespace_before = last.comma.whitespace_before if has_trailing_comma else cst.SimpleWhitespace("")
    args[-1] = last.with_changes(
        whitespace_after_arg=last.whitespace_after_arg if has_trailing_comma else cst.SimpleWhitespace(""),
        comma=cst.Comma(whitespace_before=whitespace_before, whitespace_after=separator),
    )
    if has_trailing_comma:
        args.append(new.with_changes(comma=cst.Comma(whitespace_after=closing)))
    else:
        args.append(new.with_changes(whitespace_after_arg=closing))
    return call.with_changes(args=args)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == name)]
    removed_last = call.args[-1] if args and len(args) < len(call.args) and call.args[-1] is not args[-1] else None
    if removed_last is not None:
        if removed_last.comma == cst.MaybeSentinel.DEFAULT:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        elif isinstance(args[-1].comma, cst.Comma):
            args[-1] = args[-1].with_changes(
                comma=args[-1].comma.with_changes(
                    whitespace_after=_closing_whitespace(args[-1].comma, removed_last.comma)
                )
            )
    return call.with_changes(args=args)


def _closing_whitespace(kept: cst.Comma, removed: cst.Comma | cst.MaybeSentinel) -> cst.BaseParenthesizableWhitespace:
    """The whitespace after the new last argument's comma when the last argument was
    removed: its own comment stays, the line break before the ``)`` comes from the removed
    argument's comma (so the ``)`` keeps its indentation)."""
    own, closing = kept.whitespace_after, getattr(removed, "whitespace_after", None)
    if isinstance(own, cst.ParenthesizedWhitespace) and isinstance(closing, cst.ParenthesizedWhitespace):
        return own.with_changes(indent=closing.indent, last_line=closing.last_line)
    return own


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
    statements = parse_statements(code)
    if isinstance(body, cst.IndentedBlock):
        return compound.with_changes(body=body.with_changes(body=[*body.body, *statements]))
    # `for x in y: stmt` on one line: turn it into a block.
    small = list(body.body)
    line = cst.SimpleStatementLine(body=[s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for s in small])
    return compound.with_changes(body=cst.IndentedBlock(body=[line, *statements]))


def drop_with_items(statement: cst.With, dropped: Collection[int]) -> cst.With:
    """``statement`` without its items at the positions ``dropped`` (one item stays)."""
    items = [item for position, item in enumerate(statement.items) if position not in dropped]
    if len(statement.items) - 1 in dropped:
        # The new last item takes the old one's comma: none, or a trailing one in `(...)`.
        items[-1] = items[-1].with_changes(comma=statement.items[-1].comma)
    return statement.with_changes(items=items)


def unwrap_with(statement: cst.With) -> tuple[list[Statement], list[cst.EmptyLine]]:
    """The statements of ``statement``'s body, to stand in its place, and the comment
    lines that closed the body (they must follow the statements).

    Statements carry no indentation of their own in libcst: placed in the block that
    held the ``with``, they are printed at its indentation. The lines above the
    ``with``, then the comments of its header (``with ...:  # why``), go above the
    first statement."""
    header: list[cst.EmptyLine] = [
        cst.EmptyLine(comment=comment)
        for part in (statement.lpar, *statement.items, statement.rpar, statement.whitespace_before_colon)
        if isinstance(part, cst.CSTNode)
        for comment in m.findall(part, m.Comment())
    ]
    body = statement.body
    if isinstance(body, cst.SimpleStatementSuite):  # `with ...: a; b  # why`
        statements: list[Statement] = [
            cst.SimpleStatementLine(body=body.body, trailing_whitespace=body.trailing_whitespace)
        ]
        footer: list[cst.EmptyLine] = []
    else:
        statements = list(body.body)
        footer = list(body.footer)
        if body.header.comment is not None:
            header.append(cst.EmptyLine(comment=body.header.comment))
    first = statements[0]
    statements[0] = first.with_changes(leading_lines=[*statement.leading_lines, *header, *first.leading_lines])
    return statements, footer


# --- what a removal leaves -------------------------------------------------------------


def joined_lines(first: Sequence[cst.EmptyLine], then: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines of a removed statement, ``first``, followed by those of the next
    statement: where blank lines of both meet, the longer run stands (a blank line that
    set the removed statement off now sets off what follows it, and none is doubled)."""
    trailing = len(first) - len(_without_trailing_blanks(first))
    leading = next((i for i, line in enumerate(then) if line.comment is not None), len(then))
    if trailing >= leading:
        return [*first, *then[leading:]]
    return [*first[: len(first) - trailing], *then]


def _without_trailing_blanks(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    kept = list(lines)
    while kept and kept[-1].comment is None:
        kept.pop()
    return kept


def has_no_effects(test: cst.BaseExpression) -> bool:
    """Whether evaluating ``test`` only reads: names, constants, attributes and
    subscripts of those, comparisons, ``not`` and boolean operators (no call, no
    ``:=``, no ``await``, no f-string)."""
    if isinstance(test, (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis)):
        return True
    if isinstance(test, cst.ConcatenatedString):
        return has_no_effects(test.left) and has_no_effects(test.right)
    if isinstance(test, cst.Attribute):
        return has_no_effects(test.value)
    if isinstance(test, cst.Subscript):
        return has_no_effects(test.value) and all(
            m.matches(element, m.SubscriptElement(slice=m.Index(star=None))) and has_no_effects(element.slice.value)
            for element in test.slice
        )
    if isinstance(test, cst.Comparison):
        return has_no_effects(test.left) and all(has_no_effects(target.comparator) for target in test.comparisons)
    if isinstance(test, cst.BooleanOperation):
        return has_no_effects(test.left) and has_no_effects(test.right)
    if isinstance(test, cst.UnaryOperation):
        return has_no_effects(test.expression)
    return False
