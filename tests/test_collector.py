"""The command line raises the collector's thresholds (a large fix was superlinear at
CPython's defaults) and never lowers thresholds set higher."""

from __future__ import annotations

import gc

import pytest

from xlalint import cli, cli_app
from xlalint.engine import collector
from xlalint.engine.collector import THRESHOLDS, collect_less_often


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
