"""Each fix operation, before and after, on libcst: comments and layout survive."""

from __future__ import annotations

import ast
import textwrap

import pytest

from xlalint.fixers.apply import apply_fixes, fix_edits, text_edits
from xlalint.model import (
    AddParameter,
    AppendToBody,
    Fix,
    Import,
    InsertStatement,
    MoveStatement,
    RemoveKeyword,
    RemoveStatement,
    ReplaceExpr,
    SetKeyword,
    Span,
    UnwrapWith,
)


def node_span(source: str, predicate) -> Span:
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if predicate(node):
            return Span.of(node, lines)
    raise AssertionError("no such node")


def call_to(name: str):
    def match(node):
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        return (isinstance(func, ast.Attribute) and func.attr == name) or (
            isinstance(func, ast.Name) and func.id == name
        )

    return match


def apply(source: str, *operations, imports=(), unused=()) -> str:
    source = textwrap.dedent(source)
    ops = [op(source) for op in operations]
    fixed, applied = apply_fixes(source, [Fix("safe", "test", tuple(ops), tuple(imports), tuple(unused))])
    assert applied, "the fix was not applied"
    ast.parse(fixed)
    return fixed


def test_replace_expression_keeps_parts_and_comments():
    fixed = apply(
        "y = (x + 1).cuda()  # keep\n",
        lambda s: ReplaceExpr(
            node_span(s, call_to("cuda")),
            "{recv}.to(torch_xla.device())",
            (("recv", node_span(s, lambda n: isinstance(n, ast.BinOp))),),
        ),
        imports=[Import("torch_xla")],
    )
    assert fixed == "import torch_xla\n\ny = (x + 1).to(torch_xla.device())  # keep\n"


def test_set_keyword_replaces_adds_and_respects_trailing_comma_layout():
    source = "tok(\n    a,\n    padding=True,\n)\n"
    fixed = apply(
        source,
        lambda s: SetKeyword(node_span(s, call_to("tok")), "padding", '"max_length"'),
        lambda s: SetKeyword(node_span(s, call_to("tok")), "max_length", "512", only_if_missing=True),
    )
    assert fixed == 'tok(\n    a,\n    padding="max_length",\n    max_length=512,\n)\n'


def test_set_keyword_after_a_last_argument_without_comma_keeps_the_closing_paren_on_its_line():
    # The line break before `)` belongs to the last argument: the new one takes it over.
    source = "loader = DataLoader(\n    ds,\n    sampler=make_sampler(ds)\n)\n"
    fixed = apply(source, lambda s: SetKeyword(node_span(s, call_to("DataLoader")), "drop_last", "True"))
    assert fixed == "loader = DataLoader(\n    ds,\n    sampler=make_sampler(ds),\n    drop_last=True\n)\n"
    # Arguments on the line of `(`, only `)` below them.
    source = "loader = DataLoader(ds\n)\n"
    fixed = apply(source, lambda s: SetKeyword(node_span(s, call_to("DataLoader")), "drop_last", "True"))
    assert fixed == "loader = DataLoader(ds, drop_last=True\n)\n"


def with_keyword(source: str) -> str:
    """``source`` with ``drop_last=True`` given to its call of ``f``, checked to parse, to
    give the same text through the fix's edits, and to be left alone by a second pass."""
    fixed = apply(source, lambda s: SetKeyword(node_span(s, call_to("f")), "drop_last", "True"))
    fix = Fix("safe", "test", (SetKeyword(node_span(source, call_to("f")), "drop_last", "True"),))
    assert apply_edits(source, fix_edits(source, fix)) == fixed
    assert apply_fixes(fixed, [])[0] == fixed
    return fixed


@pytest.mark.parametrize(
    "source, expected",
    [
        ("f(a, **kw)\n", "f(a, drop_last=True, **kw)\n"),
        ("f(**kw)\n", "f(drop_last=True, **kw)\n"),
        ("f(*args, **kw)\n", "f(*args, drop_last=True, **kw)\n"),
        # The defect seen in real scripts: the new keyword was put on the line of `a`.
        ("f(a,\n    **kw\n)\n", "f(a,\n    drop_last=True,\n    **kw\n)\n"),
        ("f(\n    a,\n    **kw\n)\n", "f(\n    a,\n    drop_last=True,\n    **kw\n)\n"),
        ("f(\n    a,\n    **kw,\n)\n", "f(\n    a,\n    drop_last=True,\n    **kw,\n)\n"),
        ("f(\n    *args,\n    **kw\n)\n", "f(\n    *args,\n    drop_last=True,\n    **kw\n)\n"),
        # The comment that ends the line before stays there, the comment lines above
        # `**kw` and the one after it stay with it.
        (
            "f(\n    a,  # data\n    # options\n    **kw  # extra\n)\n",
            "f(\n    a,  # data\n    drop_last=True,\n    # options\n    **kw  # extra\n)\n",
        ),
        ("f(  # options\n    **kw\n)\n", "f(  # options\n    drop_last=True,\n    **kw\n)\n"),
    ],
    ids=[
        "one line",
        "only kwargs",
        "args and kwargs",
        "after a first line",
        "one a line",
        "trailing comma",
        "star args",
        "comments",
        "comment after the paren",
    ],
)
def test_set_keyword_goes_before_double_star_kwargs_in_the_layout_of_the_call(source, expected):
    assert with_keyword(source) == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        ("f()\n", "f(drop_last=True)\n"),
        ("f(a)\n", "f(a, drop_last=True)\n"),
        ("f(a, *args)\n", "f(a, *args, drop_last=True)\n"),
        ("f(\n    a,\n    *args\n)\n", "f(\n    a,\n    *args,\n    drop_last=True\n)\n"),
        ("f(\n    a,\n    b)\n", "f(\n    a,\n    b,\n    drop_last=True)\n"),
        # A comment after the last argument stays after it, with or without its comma.
        ("f(\n    a,\n    b  # last\n)\n", "f(\n    a,\n    b,  # last\n    drop_last=True\n)\n"),
        ("f(\n    a,\n    b,  # last\n)\n", "f(\n    a,\n    b,  # last\n    drop_last=True,\n)\n"),
        ("f(\n    a,  # first\n    b,\n)\n", "f(\n    a,  # first\n    b,\n    drop_last=True,\n)\n"),
        # Comment lines above `)` stay above it.
        ("f(\n    a,\n    # end\n)\n", "f(\n    a,\n    drop_last=True,\n    # end\n)\n"),
        ("x = f(\n        a,\n    )\n", "x = f(\n        a,\n        drop_last=True,\n    )\n"),
    ],
    ids=[
        "no arguments",
        "one line",
        "star args",
        "star args, one a line",
        "paren after the last",
        "comment",
        "comment after the comma",
        "comment on an earlier line",
        "comment line before the paren",
        "indented",
    ],
)
def test_set_keyword_appended_keeps_the_layout_and_comments(source, expected):
    assert with_keyword(source) == expected


def test_remove_keyword():
    fixed = apply("spawn(fn, args=(), nprocs=8)\n", lambda s: RemoveKeyword(node_span(s, call_to("spawn")), "nprocs"))
    assert fixed == "spawn(fn, args=())\n"


def test_removing_the_last_keyword_of_a_multiline_call_keeps_the_closing_paren_in_place():
    source = "spawn(\n    fn,\n    args=(),  # the args\n    nprocs=8,  # one for debugging\n)\n"
    fixed = apply(source, lambda s: RemoveKeyword(node_span(s, call_to("spawn")), "nprocs"))
    assert fixed == "spawn(\n    fn,\n    args=(),  # the args\n)\n"


def test_insert_and_remove_statements():
    source = "for x in y:\n    # clip\n    clip(p)\n    torch.cuda.empty_cache()\n"
    fixed = apply(
        source,
        lambda s: InsertStatement(node_span(s, call_to("clip")), "scaler.unscale_(opt)", "before"),
        lambda s: RemoveStatement(node_span(s, call_to("empty_cache"))),
    )
    assert fixed == "for x in y:\n    scaler.unscale_(opt)\n    # clip\n    clip(p)\n"


def removed(source: str, *names: str) -> str:
    """``source`` without the statements that call ``names`` (one fix each, one pass),
    checked to parse, to give the same text through the fixes' edits when there is one
    fix, and to be left alone by a second pass."""
    source = textwrap.dedent(source)
    calls = [node for node in ast.walk(ast.parse(source)) if any(call_to(name)(node) for name in names)]
    fixes = [Fix("safe", "remove", (RemoveStatement(Span.of(call, source.splitlines())),)) for call in calls]
    fixed, applied = apply_fixes(source, fixes)
    assert applied == fixes
    ast.parse(fixed)
    if len(fixes) == 1:
        assert apply_edits(source, fix_edits(source, fixes[0])) == fixed
    assert apply_fixes(fixed, [])[0] == fixed
    return fixed


@pytest.mark.parametrize(
    "source, expected",
    [
        # The imagenet example's shape, with nothing else in the `if`: the `if` goes.
        (
            "if args.gpu is not None:\n    torch.cuda.set_device(args.gpu)\nmodel = Net()\n",
            "model = Net()\n",
        ),
        # Two fixes of one pass empty the block between them.
        (
            "def f(x, y):\n    if x is not None and y:\n        x.record_stream(s)\n        y.record_stream(s)\n"
            "    return x\n",
            "def f(x, y):\n    return x\n",
        ),
        ("if not cfg.flags['cuda'] or n > 1:\n    torch.cuda.empty_cache()\nx = 1\n", "x = 1\n"),
        ("if (a.b[0] == -1) is True:\n    torch.cuda.empty_cache()\nx = 1\n", "x = 1\n"),
    ],
    ids=["is not None", "two removals", "boolean ops and a subscript", "constants"],
)
def test_an_if_that_a_removal_leaves_doing_nothing_is_removed(source, expected):
    assert removed(source, "set_device", "record_stream", "empty_cache") == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        # The imagenet example: only `set_device` goes, the `if` still does something.
        (
            "if args.gpu is not None:\n    torch.cuda.set_device(args.gpu)\n    model = model.cuda(args.gpu)\n",
            "if args.gpu is not None:\n    model = model.cuda(args.gpu)\n",
        ),
        # A test that may have effects is still evaluated.
        ("if ready():\n    torch.cuda.empty_cache()\n", "if ready():\n    pass\n"),
        ("if (n := len(xs)) > 1:\n    torch.cuda.empty_cache()\n", "if (n := len(xs)) > 1:\n    pass\n"),
        ("if f'{x}':\n    torch.cuda.empty_cache()\n", "if f'{x}':\n    pass\n"),
        # An `if` with an `else` keeps its (empty) body.
        ("if c:\n    torch.cuda.empty_cache()\nelse:\n    g()\n", "if c:\n    pass\nelse:\n    g()\n"),
        ("if a:\n    f()\nelif b:\n    torch.cuda.empty_cache()\nelse:\n    g()\n", None),
        # Loops, `with`, `try` and `def` keep their bodies.
        ("for x in xs:\n    torch.cuda.empty_cache()\n", "for x in xs:\n    pass\n"),
        ("while c:\n    torch.cuda.empty_cache()\n", "while c:\n    pass\n"),
        ("with lock:\n    torch.cuda.empty_cache()\n", "with lock:\n    pass\n"),
        ("try:\n    torch.cuda.empty_cache()\nexcept E:\n    g()\n", "try:\n    pass\nexcept E:\n    g()\n"),
        ("def f():\n    torch.cuda.empty_cache()\n", "def f():\n    pass\n"),
        # A block that the removed `if` leaves empty is judged the same way.
        ("for b in xs:\n    if b is not None:\n        b.record_stream(s)\n", "for b in xs:\n    pass\n"),
        ("x = 0\nif a:\n    if b is not None:\n        b.record_stream(s)\nx = 1\n", "x = 0\nx = 1\n"),
        ("if a.ok():\n    if b:\n        b.record_stream(s)\n", "if a.ok():\n    pass\n"),
        # A `pass` the user wrote is theirs.
        ("if c:\n    pass\ntorch.cuda.empty_cache()\nx = 1\n", "if c:\n    pass\nx = 1\n"),
    ],
    ids=[
        "imagenet",
        "call",
        "walrus",
        "f-string",
        "else",
        "elif with else",
        "for",
        "while",
        "with",
        "try",
        "def",
        "if in a loop",
        "nested ifs",
        "nested under a call",
        "the user's pass",
    ],
)
def test_a_removal_keeps_an_if_that_still_does_something_and_other_blocks(source, expected):
    if expected is None:  # the `elif` stays: the `else` after it needs it
        expected = source.replace("    torch.cuda.empty_cache()", "    pass")
    assert removed(source, "set_device", "record_stream", "empty_cache") == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        ("if c:\n    f()\nelse:\n    torch.cuda.empty_cache()\nx = 1\n", "if c:\n    f()\nx = 1\n"),
        ("if a:\n    f()\nelif b:\n    torch.cuda.empty_cache()\n", "if a:\n    f()\n"),
        ("if a:\n    f()\nelif b:\n    g()\nelse:  # fallback\n    torch.cuda.empty_cache()\n", None),
        ("for x in xs:\n    f(x)\nelse:\n    torch.cuda.empty_cache()\n", "for x in xs:\n    f(x)\n"),
        (
            "try:\n    f()\nexcept E:\n    g()\nelse:\n    torch.cuda.empty_cache()\n",
            "try:\n    f()\nexcept E:\n    g()\n",
        ),
        # A call in an `elif` test is still evaluated: only its body is emptied.
        ("if a:\n    f()\nelif b():\n    torch.cuda.empty_cache()\n", "if a:\n    f()\nelif b():\n    pass\n"),
    ],
    ids=["if else", "elif", "else after elif", "for else", "try else", "elif with a call"],
)
def test_an_else_or_elif_left_empty_is_dropped(source, expected):
    if expected is None:
        expected = "if a:\n    f()\nelif b:\n    g()\n"
    assert removed(source, "empty_cache") == expected


def test_the_comment_lines_above_a_removed_statement_stay():
    # They are the user's (ruff keeps them too); its own end-of-line comment goes with it.
    source = """\
        def f(model):
            x = 1
            # free what the last step left
            torch.cuda.empty_cache()  # (slow)
            return model
        """
    assert removed(source, "empty_cache") == textwrap.dedent(
        """\
        def f(model):
            x = 1
            # free what the last step left
            return model
        """
    )
    # The last statement of a block: the comment ends the block, the block gets `pass`.
    assert removed("def f():\n    # free memory\n    torch.cuda.empty_cache()\n", "empty_cache") == (
        "def f():\n    # free memory\n    pass\n"
    )
    assert removed("x = 1\n# free memory\ntorch.cuda.empty_cache()\n", "empty_cache") == "x = 1\n# free memory\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # issue 23: the blank line that set the removed call off now sets off the `with`.
        (
            "for e in range(2):\n    step()\n\ntorch.cuda.empty_cache()\nwith open(p) as f:\n    f.read()\n",
            "for e in range(2):\n    step()\n\nwith open(p) as f:\n    f.read()\n",
        ),
        # Blank lines on both sides: one run stays, the longer, not both.
        ("a = 1\n\ntorch.cuda.empty_cache()\n\nb = 2\n", "a = 1\n\nb = 2\n"),
        ("a = 1\n\n\ntorch.cuda.empty_cache()\n\nb = 2\n", "a = 1\n\n\nb = 2\n"),
        # The blank line, then the comment that belongs to the next statement.
        ("a = 1\n\ntorch.cuda.empty_cache()\n# why\nb = 2\n", "a = 1\n\n# why\nb = 2\n"),
        # At the end of a block or of the file a blank line separates nothing: it goes.
        ("def f():\n    a = 1\n\n    torch.cuda.empty_cache()\nb = 2\n", "def f():\n    a = 1\nb = 2\n"),
        ("a = 1\n\ntorch.cuda.empty_cache()\n", "a = 1\n"),
        # Two removed statements in a row keep one blank run between their neighbours.
        (
            "a = 1\n\ntorch.cuda.empty_cache()\n\ntorch.cuda.empty_cache()\nb = 2\n",
            "a = 1\n\nb = 2\n",
        ),
    ],
)
def test_the_blank_lines_around_a_removed_statement_stay(source, expected):
    fixed = apply(
        source,
        *(lambda s, n=n: RemoveStatement(nth_call(s, "empty_cache", n)) for n in range(source.count("empty_cache"))),
    )
    assert fixed == expected


def nth_call(source: str, name: str, n: int) -> Span:
    lines = source.splitlines()
    calls = sorted((node for node in ast.walk(ast.parse(source)) if call_to(name)(node)), key=lambda c: c.lineno)
    return Span.of(calls[n], lines)


def test_the_comments_above_a_removed_if_stay_and_those_inside_it_go():
    # As a removed statement takes the comment lines above it, the `if` takes what is in
    # it (its header's comment, its body's); the lines above it were not in it, and stay
    # above what follows (in a notebook, a cell's marker is one of them).
    source = """\
        def f(x):
            y = x + 1

            # on the copy stream
            if x is not None:  # a batch is ready
                # keep x alive until the copy is done
                x.record_stream(s)
                # (the allocator would reuse it)

            return y
        """
    assert removed(source, "record_stream") == textwrap.dedent(
        """\
        def f(x):
            y = x + 1

            # on the copy stream

            return y
        """
    )
    source = "def f(x):\n    # on the copy stream\n    if x is not None:\n        x.record_stream(s)\n# end\n"
    assert removed(source, "record_stream") == "def f(x):\n    # on the copy stream\n    pass\n# end\n"
    source = "y = 1\nif x is not None:\n    x.record_stream(s)\n# the last comment\n"
    assert removed(source, "record_stream") == "y = 1\n# the last comment\n"
    source = "y = 1\n# copy\nif x is not None:\n    x.record_stream(s)\n"
    assert removed(source, "record_stream") == "y = 1\n# copy\n"


def test_an_if_emptied_next_to_inserted_statements_keeps_them():
    source = "if gpu is not None:\n    torch.cuda.set_device(gpu)\nx = 1\n"
    fixed = apply(
        source,
        lambda s: RemoveStatement(node_span(s, call_to("set_device"))),
        lambda s: InsertStatement(node_span(s, lambda n: isinstance(n, ast.If)), "setup()", "before"),
    )
    assert fixed == "setup()\nx = 1\n"


def test_move_statement_keeps_its_comment():
    source = "loss.backward()\nopt.step()\n# keep grads bounded\nclip(p, 1.0)\n"
    fixed = apply(
        source,
        lambda s: MoveStatement(node_span(s, call_to("clip")), node_span(s, call_to("step")), "before"),
    )
    assert fixed == "loss.backward()\n# keep grads bounded\nclip(p, 1.0)\nopt.step()\n"


def test_append_to_body_of_one_line_loop_and_block():
    fixed = apply(
        "for x in y: f(x)\n", lambda s: AppendToBody(node_span(s, lambda n: isinstance(n, ast.For)), "sync()")
    )
    assert fixed == "for x in y:\n    f(x)\n    sync()\n"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f():\n    pass\n", "def f(index):\n    pass\n"),
        ("def f(a, *, b):\n    pass\n", "def f(index, a, *, b):\n    pass\n"),
        ("def f(*args):\n    pass\n", "def f(index, *args):\n    pass\n"),
    ],
)
def test_add_parameter(source, expected):
    fixed = apply(source, lambda s: AddParameter(node_span(s, lambda n: isinstance(n, ast.FunctionDef)), "index"))
    assert fixed == expected


def test_unused_imports_are_removed_only_when_unused():
    source = "from torch.cuda.amp import GradScaler, autocast\nscaler = GradScaler()\nwith autocast():\n    pass\n"
    fixed = apply(
        source,
        lambda s: RemoveStatement(node_span(s, call_to("GradScaler"))),
        unused=[Import("torch.cuda.amp", "GradScaler"), Import("torch.cuda.amp", "autocast")],
    )
    assert fixed == "from torch.cuda.amp import autocast\nwith autocast():\n    pass\n"


def test_overlapping_fixes_wait_for_the_next_pass():
    source = "f(g(x))\n"
    outer = Fix("safe", "outer", (ReplaceExpr(node_span(source, call_to("f")), "h(1)"),))
    inner = Fix("safe", "inner", (ReplaceExpr(node_span(source, call_to("g")), "k(2)"),))
    fixed, applied = apply_fixes(source, [outer, inner])
    assert fixed == "h(1)\n" and applied == [outer]


def unwrap(context: str):
    """The operation that takes the ``with`` item ``context`` (its source) out."""

    def operation(source: str) -> UnwrapWith:
        items = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.withitem)]
        [item] = [n for n in items if ast.unparse(n.context_expr) == context]
        return UnwrapWith(Span.of(item.context_expr, source.splitlines()))

    return operation


def unwrapped(source: str, *contexts: str) -> str:
    """``source`` with the ``with`` items ``contexts`` taken out, checked to parse, to
    give the same text through the fix's edits, and to be left alone by a second pass."""
    fixed = apply(source, *(unwrap(c) for c in contexts))
    source = textwrap.dedent(source)
    fix = Fix("safe", "test", tuple(unwrap(c)(source) for c in contexts))
    assert apply_edits(source, fix_edits(source, fix)) == fixed
    assert apply_fixes(fixed, [])[0] == fixed
    return fixed


def test_unwrap_with_puts_the_body_in_its_place_with_every_comment():
    source = """\
        def step(model, x, side):
            # on the side stream
            with torch.cuda.stream(side):  # overlap with the copy
                # forward
                y = model(x)  # the activations

                z = y * 2
                # z is ready

            # back on the main stream
            return z
        """
    assert unwrapped(source, "torch.cuda.stream(side)") == textwrap.dedent(
        """\
        def step(model, x, side):
            # on the side stream
            # overlap with the copy
            # forward
            y = model(x)  # the activations

            z = y * 2
            # z is ready

            # back on the main stream
            return z
        """
    )


def test_unwrap_with_keeps_the_closing_comments_at_the_end_of_a_block_and_a_module():
    source = "if ready:\n    with torch.cuda.stream(s):\n        y = f(x)\n        # done\n# end\n"
    assert unwrapped(source, "torch.cuda.stream(s)") == "if ready:\n    y = f(x)\n    # done\n# end\n"
    source = "with torch.cuda.stream(s):\n    y = f(x)\n    # done\n"
    assert unwrapped(source, "torch.cuda.stream(s)") == "y = f(x)\n# done\n"


def test_unwrap_the_only_statement_of_a_block_and_a_one_line_with():
    source = "for x in xs:\n    with torch.cuda.stream(s): y = f(x); z = g(y)  # one line\n"
    assert unwrapped(source, "torch.cuda.stream(s)") == "for x in xs:\n    y = f(x); z = g(y)  # one line\n"


def test_unwrap_keeps_nested_blocks_and_their_own_indentation():
    source = "with torch.cuda.device(0):\n  with torch.no_grad():\n    for i in r:\n        y = f(i)\n"
    assert unwrapped(source, "torch.cuda.device(0)") == "with torch.no_grad():\n  for i in r:\n      y = f(i)\n"


def test_nested_withs_unwrapped_in_one_pass_keep_both_closing_comments():
    source = textwrap.dedent(
        """\
        def f():
            with torch.cuda.device(0):  # outer
                with torch.cuda.stream(s):  # inner
                    y = g(x)
                    # inner done
                # outer done
            return y
        """
    )
    fixes = [Fix("safe", c, (unwrap(c)(source),)) for c in ("torch.cuda.device(0)", "torch.cuda.stream(s)")]
    fixed, applied = apply_fixes(source, fixes)
    assert applied == fixes
    assert (
        fixed == "def f():\n    # outer\n    # inner\n    y = g(x)\n    # inner done\n    # outer done\n    return y\n"
    )


@pytest.mark.parametrize(
    "source, expected",
    [
        ("with torch.cuda.stream(s), torch.no_grad():\n    y = f(x)\n", "with torch.no_grad():\n    y = f(x)\n"),
        ("with torch.no_grad(), torch.cuda.stream(s):\n    y = f(x)\n", "with torch.no_grad():\n    y = f(x)\n"),
        (
            "with (\n    torch.no_grad(),\n    torch.cuda.stream(s),\n):\n    y = f(x)\n",
            "with (\n    torch.no_grad(),\n):\n    y = f(x)\n",
        ),
        (
            "with (\n    torch.cuda.stream(s),\n    open(p) as fh,  # the log\n):\n    y = f(x)\n",
            "with (\n    open(p) as fh,  # the log\n):\n    y = f(x)\n",
        ),
    ],
    ids=["first", "last", "parenthesized last", "parenthesized first"],
)
def test_unwrap_one_of_several_items_keeps_the_others(source, expected):
    assert unwrapped(source, "torch.cuda.stream(s)") == expected


def test_unwrap_every_item_of_a_parenthesized_with_keeps_the_header_comments():
    source = "with (\n    torch.cuda.stream(s),  # side\n    torch.cuda.device(0),\n):\n    y = f(x)\n"
    assert unwrapped(source, "torch.cuda.stream(s)", "torch.cuda.device(0)") == "# side\ny = f(x)\n"


def test_unwrap_with_other_fixes_in_its_body_and_around_it():
    source = "with torch.cuda.stream(s):\n    y = x.cuda()\n    torch.cuda.empty_cache()\n"
    fixed = apply(
        source,
        unwrap("torch.cuda.stream(s)"),
        lambda s: ReplaceExpr(node_span(s, call_to("cuda")), "x.to(d)"),
        lambda s: RemoveStatement(node_span(s, call_to("empty_cache"))),
        lambda s: InsertStatement(node_span(s, lambda n: isinstance(n, ast.With)), "d = device()", "before"),
    )
    assert fixed == "d = device()\ny = x.to(d)\n"


def test_two_unwraps_of_one_with_wait_for_the_next_pass():
    source = "with torch.cuda.device(0), torch.cuda.stream(s):\n    y = f(x)\n"
    device, stream = (Fix("safe", c, (unwrap(c)(source),)) for c in ("torch.cuda.device(0)", "torch.cuda.stream(s)"))
    fixed, applied = apply_fixes(source, [device, stream])
    assert fixed == "with torch.cuda.stream(s):\n    y = f(x)\n" and applied == [device]


def test_an_async_with_is_not_unwrapped():
    source = "async def f():\n    async with torch.cuda.stream(s):\n        y = await g()\n"
    assert apply_fixes(source, [Fix("safe", "t", (unwrap("torch.cuda.stream(s)")(source),))]) == (source, [])


def apply_edits(text: str, edits) -> str:
    lines = text.splitlines(keepends=True)

    def offset(row: int, column: int) -> int:
        return sum(len(line) for line in lines[: row - 1]) + column - 1

    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: offset(*edit.start)] + edit.content + text[offset(*edit.end) :]
    return text


def test_text_edits_are_narrow():
    before = "a = x.cuda()\nb = 1\n"
    after = "import torch_xla\na = x.to(torch_xla.device())\nb = 1\n"
    edits = text_edits(before, after)
    assert [(e.content, e.start, e.end) for e in edits] == [
        ("import torch_xla\n", (1, 1), (1, 1)),
        ("to(torch_xla.device())", (1, 7), (1, 13)),
    ]


@pytest.mark.parametrize(
    "before, after",
    [
        ("a\nb\nc\n", "a\nc\n"),
        ("a\nb\n", "a\nb\nc\n"),
        ("for x in y:\n    f(x)\n", "import t\n\nfor x in y:\n    f(x)\n    t.sync()\n"),
        ("x = 1\r\ny = 2\r\n", "x = 10\r\ny = 2\r\n"),
    ],
)
def test_text_edits_reproduce_the_fixed_text(before, after):
    assert apply_edits(before, text_edits(before, after)) == after


def test_text_edits_of_many_repeated_lines_are_linear():
    """A fix-all of a file of repeated blocks (every line also many lines away):
    difflib's matcher took 15 s of CPU for 4,000 lines; the edits come in well under
    a second and still reproduce the text, narrowly (one edit a change)."""
    import random
    import time

    block = "def f():\n    x = torch.ones(2).cuda()\n    loss.backward()\n\n"
    before = "import torch\n" + block * 1000
    after = "import torch\nimport torch_xla\n" + block.replace("cuda()", "to(torch_xla.device())") * 1000
    start = time.process_time()
    edits = text_edits(before, after)
    assert time.process_time() - start < 3
    assert apply_edits(before, edits) == after
    assert len(edits) == 1001
    # And on random changes to random repeated lines, the edits give the text exactly.
    pick = random.Random(39)
    pool = ["x = 1\n", "\n", "    y()\n", "def f():\n", "a.cuda()\n"]
    for _ in range(40):
        lines = [pick.choice(pool) for _ in range(pick.choice([5, 400]))]
        changed = list(lines)
        for _ in range(pick.randint(1, 30)):
            at, change = pick.randrange(len(changed) + 1), pick.randrange(3)
            if change == 0:
                changed.insert(at, "new\n")
            elif at < len(changed):
                changed[at : at + 1] = [] if change == 1 else ["z()\n"]
        assert apply_edits("".join(lines), text_edits("".join(lines), "".join(changed))) == "".join(changed)


HEADS = {
    "docstring": '"""Doc."""\nimport os\n\nx = 1\n\ndef f():\n    import torch\n',
    "strict": "__strict__ = True\nimport os\nx = 1\n",
    "future": "from __future__ import annotations\nimport os\nx = 1\n",
    "merge into a from-import": "import os\nfrom torch_xla.core import xla_model\nx = 1\n",
    "already imported": "import torch_xla.core.xla_model as xm\nimport torch_xla\nx = 1\n",
    "no imports": "x = 1\ny = 2\n",
    "only imports": "import os\nimport sys\n",
    "code first": "x = 1\nimport os\ny = 2\n",
    "empty": "",
    "comment header": "# header\n\nimport os\n# a comment\nx = 1\n# footer\n",
}


@pytest.mark.parametrize("source", HEADS.values(), ids=HEADS.keys())
def test_imports_added_from_the_head_are_those_of_the_whole_module(source):
    import libcst as cst
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    from xlalint.fixers.imports import with_head_transformed

    def visitor() -> AddImportsVisitor:
        context = CodemodContext()
        AddImportsVisitor.add_needed_import(context, "torch_xla")
        AddImportsVisitor.add_needed_import(context, "torch_xla.core", "xla_model", "xm")
        AddImportsVisitor.add_needed_import(context, "torch_xla.core.xla_model", asname="xm")
        AddImportsVisitor.add_needed_import(context, "__future__", "annotations")
        return context

    module = cst.parse_module(source)
    whole = AddImportsVisitor(visitor()).transform_module(module).code
    assert with_head_transformed(module, AddImportsVisitor(visitor())).code == whole


# --- imports in sorted place (issue 23) ------------------------------------------------


def with_imports(source: str, *imports: Import) -> str:
    """``source`` with ``imports`` added by a fix that changes nothing else."""
    source = textwrap.dedent(source)
    last = source.rstrip("\n").split("\n")[-1]
    line = source.count("\n")
    op = ReplaceExpr(Span(line, 0, line, len(last)), last)
    fixed, applied = apply_fixes(source, [Fix("safe", "test", (op,), imports)])
    assert applied
    return fixed


@pytest.mark.parametrize(
    ("source", "imports", "expected"),
    [
        # `import x` among the straight imports of its block, before the `from` imports.
        (
            "import os\n\nimport torch\nimport torch_xla.core.xla_model as xm\nfrom torch.utils.data import DataLoader\n\nx\n",
            [Import("torch_xla"), Import("torch_xla.runtime", asname="xr")],
            "import os\n\nimport torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
            "import torch_xla.runtime as xr\nfrom torch.utils.data import DataLoader\n\nx\n",
        ),
        # `from x import y` among the `from` imports, sorted by module.
        (
            "import torch\nfrom torch.utils.data import DataLoader\nfrom transformers import AutoModel\n\nx\n",
            [Import("torch.utils.data.distributed", "DistributedSampler")],
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "from torch.utils.data.distributed import DistributedSampler\nfrom transformers import AutoModel\n\nx\n",
        ),
        # A name merged into a sorted `from` import keeps it sorted.
        (
            "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\nx\n",
            [Import("torch.utils.data", "DistributedSampler")],
            "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler, TensorDataset\n\nx\n",
        ),
        # The third-party block, not the stdlib one; the comment above an import stays
        # with it; the first of a block takes the block's blank line.
        (
            "import os\nimport sys\n\n# the model\nimport transformers\n\nx\n",
            [Import("torch_xla")],
            "import os\nimport sys\n\nimport torch_xla\n# the model\nimport transformers\n\nx\n",
        ),
        (
            "import os\n\nimport zzz\n\nx\n",
            [Import("torch_xla")],
            "import os\n\nimport torch_xla\nimport zzz\n\nx\n",
        ),
        # No import of its section yet: a block of its own after the stdlib block.
        (
            '"""Doc."""\n\nimport os\nimport sys\n\nx\n',
            [Import("torch_xla")],
            '"""Doc."""\n\nimport os\nimport sys\n\nimport torch_xla\n\nx\n',
        ),
        # A block that mixes the two styles (force-sort-within-sections): by module only.
        (
            "import torch\nfrom torch import nn\nimport torch_xla.runtime as xr\n\nx\n",
            [Import("torch_xla.core.xla_model", asname="xm")],
            "import torch\nfrom torch import nn\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n\nx\n",
        ),
    ],
)
def test_a_new_import_joins_its_block_in_sorted_place(source, imports, expected):
    assert with_imports(source, *imports) == expected


def test_added_imports_pass_ruffs_isort_on_an_example(tmp_path):
    """The whole-file check: the ported example's imports are as ruff's `I` sorts them."""
    import shutil
    import subprocess
    from pathlib import Path

    from xlalint.engine.config import Settings
    from xlalint.engine.fixing import fix_source

    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    for name in ("cuda_port.py", "checkpoint_each_epoch.py"):
        example = Path(__file__).resolve().parent.parent / "examples" / name
        fixed = fix_source(example.read_text(), str(example), Settings(), unsafe=True).source
        target = tmp_path / name
        target.write_text(fixed)
        result = subprocess.run(
            [ruff, "check", "--isolated", "--select", "I", "--diff", str(target)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout
