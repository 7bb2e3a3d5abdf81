"""XLA303 padding-without-truncation on whole scripts, and with XLA101's fix."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA303"
CODE = "XLA303"

# case -> the (line, column, code) of every finding.
EXPECTED = {
    # A module-level `padding = "max_length" if ... else False` read in a function, and an
    # explicit `truncation=False`; `.pad`, the collator and a truncating call are fine.
    "glue_tpu": [(22, 9, CODE), (28, 47, CODE)],
}


def findings(source: str, path: str = "f.py", codes=(CODE,)):
    return [f for f in lint_source(source, path, Settings(), select=list(codes)) if f.code in codes]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    path = FIXTURES / f"{case}.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.code) for f in found] == EXPECTED[case]
    assert all(f.fix is not None and f.fix.applicability == "unsafe" for f in found)


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_fixed_files_are_clean():
    for case in EXPECTED:
        assert findings((FIXTURES / f"{case}.unsafe.py").read_text()) == []


BOTH = ("XLA101", "XLA303")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # XLA101 pads to max_length and truncates: nothing left for XLA303.
        (
            'enc = tokenizer(texts, padding="longest")',
            'enc = tokenizer(texts, padding="max_length", max_length=512, truncation=True)',
        ),
        (
            "enc = tokenizer(texts, padding=True, truncation=False)",
            'enc = tokenizer(texts, padding="max_length", truncation=True, max_length=512)',
        ),
        # A strategy is kept by both.
        (
            'enc = tokenizer(a, b, padding="longest", truncation="only_first")',
            'enc = tokenizer(a, b, padding="max_length", truncation="only_first", max_length=512)',
        ),
        # XLA101 leaves a conditional with a max_length branch alone; XLA303 truncates it.
        (
            'enc = tokenizer(texts, padding="max_length" if on_tpu else "longest", max_length=64)',
            'enc = tokenizer(texts, padding="max_length" if on_tpu else "longest", max_length=64, truncation=True)',
        ),
        # `.pad` takes no truncation: XLA101 only.
        (
            "batch = tokenizer.pad(features, padding=True)",
            'batch = tokenizer.pad(features, padding="max_length", max_length=512)',
        ),
    ],
)
def test_xla101_and_xla303_fixes_agree(source, expected):
    source = f"import torch\n{source}\n"
    result = fix_source(source, "f.py", Settings(), unsafe=True, select=list(BOTH))
    assert result.error is None, result.error
    assert result.source == f"import torch\n{expected}\n"
    ast.parse(result.source)
    assert findings(result.source, codes=BOTH) == []
    assert fix_source(result.source, "f.py", Settings(), unsafe=True, select=list(BOTH)).source == result.source


def test_whole_file_with_both_rules_is_idempotent():
    source = (FIXTURES / "glue_tpu.py").read_text().replace('padding="max_length", max_length=8', "padding=True")
    result = fix_source(source, "f.py", Settings(), unsafe=True, select=list(BOTH))
    assert result.error is None
    assert findings(result.source, codes=BOTH) == []
    assert fix_source(result.source, "f.py", Settings(), unsafe=True, select=list(BOTH)).source == result.source
