"""``Semantic.names_at(None)`` finds each name when asked (``bound_anywhere``): the
same answers as reading the bindings of every scope of the file."""

from __future__ import annotations

import ast
from pathlib import Path

import xlalint
from xlalint.analysis.semantic import Semantic, attach_parents

TESTS = Path(__file__).parent
BINDINGS = """\
import torch
import torch_xla.core.xla_model as xm
from torch_xla import runtime as xr

counter = 0


def outer(device, *args, flag=lambda xm=1: xm, **kw):
    global counter
    counter = 1
    try:
        pass
    except ValueError as err:
        print(err)
    values = [(item := v) for v in args]
    match kw:
        case {"a": found, **rest}:
            print(found, rest)
        case [first, *others]:
            print(first, others)

    @torch.no_grad()
    def inner(torch_xla=None):
        import torch_xla
        nonlocal device
        device = torch_xla.device()
        return item, values

    class Local:
        xr = 1

    return inner, Local
"""


def same_answers(source: str) -> None:
    tree = ast.parse(source)
    semantic = Semantic(tree, attach_parents(tree))
    everywhere = semantic._all_bound_anywhere
    asked = semantic.names_at(None).visible
    for name in {*everywhere, *semantic._every_name, "torch_xla", "xm", "nowhere"}:
        assert (name in asked, asked.get(name)) == (name in everywhere, everywhere.get(name)), name


def test_each_name_is_bound_as_every_scope_says():
    same_answers(BINDINGS)
    tree = ast.parse(BINDINGS)
    names = Semantic(tree, attach_parents(tree)).names_at(None)
    assert names.means("torch", "torch") and not names.free("err") and not names.free("found")
    assert names.visible.get("torch_xla") == "" and names.visible.get("xr") == ""  # bound otherwise too
    assert names.free("nowhere") and "counter" in names.visible


def test_the_same_answers_on_the_fixtures_and_on_xlalint_itself():
    paths = [*sorted((TESTS / "fixtures").rglob("*.py")), *sorted(Path(xlalint.__file__).parent.rglob("*.py"))]
    for path in paths:
        try:
            source = path.read_text()
            ast.parse(source)
        except (SyntaxError, UnicodeDecodeError):
            continue  # fixtures that do not parse
        same_answers(source)
