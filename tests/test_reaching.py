"""The values a read can see (xlalint.analysis.reaching): the last assignment on each path."""

from __future__ import annotations

import ast
import textwrap

import pytest

from xlalint.analysis.reaching import reaching_values
from xlalint.analysis.semantic import attach_parents


def values_at_read(source: str) -> list[str] | None:
    """The source of the values the read ``probe(n)`` sees of ``n``, sorted; None: unknown."""
    tree = ast.parse(textwrap.dedent(source))
    attach_parents(tree)
    call = next(c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "probe")
    values = reaching_values(call.args[0])
    return None if values is None else sorted(ast.unparse(v) for v in values)


@pytest.mark.parametrize(
    "source, expected",
    [
        # build-nanogpt's HellaSwag count: a number, a tensor under `if ddp:`, a number again.
        (
            """
            def evaluate(examples, ddp):
                n = 0
                for example in examples:
                    if skip(example):
                        continue
                    n += 1
                if ddp:
                    n = torch.tensor(n)
                    dist.all_reduce(n)
                    n = n.item()
                probe(n)
            """,
            ["0", "1", "n.item()"],
        ),
        ("n = 1\nif c:\n    n = t\nelse:\n    n = 2\nprobe(n)", ["2", "t"]),
        ("n = 1\nwith ctx():\n    n = 3\nprobe(n)", ["3"]),
        ("n: int = 1\nn += 2\nprobe(n)", ["1", "2"]),
        ("n = 1\nwhile c:\n    n = t\nprobe(n)", ["1", "t"]),
        ("if c:\n    n = 1\nprobe(n)", None),  # the other path: set nowhere before
        ("def f(n):\n    probe(n)", None),  # a parameter
        ("n = 1\nfor x in xs:\n    probe(n)\n    n = t", None),  # the previous iteration's
        ("n = 1\nfor n in xs:\n    pass\nprobe(n)", None),  # a loop target
        ("a, n = t\nprobe(n)", None),  # a tuple target
        ("n = 1\nx = (n := t)\nprobe(n)", None),  # a walrus: not followed
        ("n = 1\ntry:\n    n = t\nexcept E:\n    pass\nprobe(n)", None),  # try: not followed
        ("n = 1\nwhile probe(n):\n    n = t", None),  # the test runs after the body too
    ],
)
def test_reaching_values(source, expected):
    assert values_at_read(source) == expected
