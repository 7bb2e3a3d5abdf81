"""The command line raises the collector's thresholds (a large fix was superlinear at
CPython's defaults) and never lowers thresholds set higher; a check leaves nothing for
the collector to find."""

from __future__ import annotations

import ast
import gc
from collections import Counter
from pathlib import Path

import pytest

from xlalint import cli, cli_app
from xlalint.engine import collector
from xlalint.engine.collector import THRESHOLDS, collect_less_often
from xlalint.engine.config import Settings
from xlalint.engine.lint import forget_parsed, iterated_imports, lint_source


@pytest.fixture
def restored_thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_the_thresholds_are_raised_and_never_lowered(restored_thresholds):
    gc.set_threshold(700, 10, 10)
    collect_less_often()
    assert gc.get_threshold() == THRESHOLDS
    gc.set_threshold(THRESHOLDS[0] * 2, 10, THRESHOLDS[2] * 3)
    collect_less_often()
    assert gc.get_threshold() == (THRESHOLDS[0] * 2, THRESHOLDS[1], THRESHOLDS[2] * 3)


def test_the_command_line_raises_them_before_it_runs(restored_thresholds, monkeypatch):
    gc.set_threshold(700, 10, 10)
    seen = []
    monkeypatch.setattr(cli_app, "app", lambda: seen.append(gc.get_threshold()))
    monkeypatch.setattr("sys.argv", ["xlalint", "rule", "--all"])  # the app's, not a plain check
    monkeypatch.setattr(collector, "_ONE_SHOT", False)
    cli.main()
    assert seen == [THRESHOLDS]
    assert collector._ONE_SHOT  # the command line's process checks once and ends


def test_a_one_shot_process_freezes_what_it_built_before_the_files_and_no_other_does(monkeypatch):
    monkeypatch.setattr(collector, "_ONE_SHOT", False)
    before = gc.get_freeze_count()
    collector.settle()
    assert gc.get_freeze_count() == before  # a library caller, the language server, --watch
    collector.one_shot()
    try:
        collector.settle()
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()


EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))
CORPUS = sorted((Path(__file__).resolve().parent / "port_corpus").glob("*/*.py"))


@pytest.mark.parametrize("path", EXAMPLES + CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_check_leaves_no_cycle_that_holds_the_tree(path):
    # A reference cycle through the analyses (a back-reference, a closure that calls
    # itself) kept the whole tree until the cyclic collector traversed it: in the
    # language server, a sixth of a large document's lint.
    source = path.read_text()
    lint_source(source, str(path), Settings(), select=["ALL"])  # imports, caches: not judged
    iterated_imports(source, str(path), Settings())
    forget_parsed()
    gc.collect()
    collecting = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        lint_source(source, str(path), Settings(), select=["ALL"])
        iterated_imports(source, str(path), Settings())
        forget_parsed()
        gc.collect()
        # `type(...)`, not isinstance: a dead weak proxy raises on any other question.
        held = Counter(type(o).__name__ for o in gc.garbage if _of_the_check(type(o)))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if collecting:
            gc.enable()
    assert not held, f"reference cycles kept: {held.most_common(8)}"


def _of_the_check(kind: type) -> bool:
    return issubclass(kind, ast.AST) or kind.__module__.startswith("xlalint")
