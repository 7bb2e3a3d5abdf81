"""The --compare progress display: a redrawn spinner line on a terminal, plain lines
otherwise."""

from __future__ import annotations

import io
import json
import os
import sys

from xlalint.harness import bootstrap, child_steps
from xlalint.harness.progress import Progress, live_text
from xlalint.harness.results import LiveCounters
from xlalint.harness.runner import read_live_counters


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(stream)
    progress.start("original")
    progress.tick(1.0)
    progress.finish("exit status 0, 1.2 s")
    assert stream.getvalue() == ("xlalint run: running original ...\nxlalint run: original: exit status 0, 1.2 s\n")


def test_spinner_redrawn_in_place_on_a_terminal():
    stream = FakeTerminal()
    progress = Progress(stream)
    progress.start("fixed")
    progress.tick(0.5)
    text = stream.getvalue()
    assert text.startswith("\r") and "running fixed" in text and "0.5 s" in text
    assert "\n" not in text
    progress.finish("exit status 0, 2.0 s")
    assert stream.getvalue().endswith("\r\033[Kxlalint run: fixed: exit status 0, 2.0 s\n")


def test_live_counters_from_the_child_on_the_spinner_line():
    """Issue 30: the spinner showed only seconds while a script compiled."""
    stream = FakeTerminal()
    progress = Progress(stream)
    progress.start("original")
    progress.tick(12.3, LiveCounters(steps=6, ms_per_step=108.94, compiles=5, executions=8))
    assert stream.getvalue() == "\r| running original   12.3 s: 5 compiles, 8 executions, 6 steps, 108.9 ms/step\033[K"


def test_live_counters_summed_over_processes_steps_of_the_training_one(tmp_path):
    assert read_live_counters(tmp_path) is None  # before the first step
    records = {
        1: {"steps": 30, "ms_per_step": 2.5, "compiles": 3, "executions": 40},
        2: {"steps": 0, "compiles": 1, "executions": 2},  # another process using XLA
        3: {"steps": 2},  # a process without torch_xla
    }
    for pid, record in records.items():
        (tmp_path / f"{bootstrap.LIVE_PREFIX}{pid}.json").write_text(json.dumps(record))
    (tmp_path / f"{bootstrap.LIVE_PREFIX}4.json").write_text("{half-writ")
    assert read_live_counters(tmp_path) == LiveCounters(
        steps=30, ms_per_step=2.5, compiles=4, executions=42, transfers=0
    )
    assert live_text(LiveCounters(steps=1)) == ": 1 steps"


def test_the_child_writes_its_counters_at_steps_at_most_every_interval(tmp_path, monkeypatch):
    monkeypatch.setenv(bootstrap.OUT_DIR_ENV, str(tmp_path))
    # A process without torch_xla: another test in this worker may have imported it.
    monkeypatch.delitem(sys.modules, "torch_xla", raising=False)
    now = [100.0]
    monkeypatch.setattr(child_steps.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(child_steps, "LIVE_EVERY_STEP_UNTIL", 0)  # see the next test
    log = bootstrap.StepLog()
    live = tmp_path / f"{bootstrap.LIVE_PREFIX}{os.getpid()}.json"
    log.on_step()
    assert json.loads(live.read_text()) == {"steps": 1}
    for _ in range(3):  # 0.125 s apart: no write until the interval has passed
        now[0] += 0.125
        log.on_step()
    assert json.loads(live.read_text()) == {"steps": 1}
    now[0] += 0.125
    log.on_step()
    assert json.loads(live.read_text()) == {"steps": 5, "ms_per_step": 125.0}


def test_the_child_writes_its_counters_at_each_of_its_first_steps(tmp_path, monkeypatch):
    """A run that hangs after a few quick steps is reported at its latest step (issue 37)."""
    monkeypatch.setenv(bootstrap.OUT_DIR_ENV, str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch_xla", raising=False)
    now = [100.0]
    monkeypatch.setattr(child_steps.time, "perf_counter", lambda: now[0])
    log = bootstrap.StepLog()
    live = tmp_path / f"{bootstrap.LIVE_PREFIX}{os.getpid()}.json"
    for _ in range(2):
        now[0] += 0.01
        log.on_step()
    assert json.loads(live.read_text())["steps"] == 2
