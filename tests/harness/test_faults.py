"""Faults are reported, not hidden, and no process of the script outlives `xlalint run`.

These scripts do not use torch, so each run takes well under a second; the checks
before the run (torch and torch_xla installed and matching) still apply.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import venv
from pathlib import Path

import pytest

from xlalint.install_hint import install_command

pytestmark = pytest.mark.usefixtures("torch_xla_required")


def _script(tmp_path: Path, source: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def test_a_failing_script_gives_its_exit_status_and_stderr_tail(tmp_path, run_xlalint):
    script = _script(
        tmp_path,
        """\
        import sys
        print("loading data", flush=True)
        print("Traceback: something broke in the data loader", file=sys.stderr)
        sys.exit(3)
        """,
    )
    outcome = run_xlalint(script, fix=False)
    assert outcome.status == 1
    assert "original run: failed with exit status 3" in outcome.stdout
    assert "something broke in the data loader" in outcome.stdout  # the stderr tail
    assert "metrics: none (no process of the script imported torch_xla and exited normally)" in outcome.stdout
    assert "the original run failed with exit status 3" in outcome.stderr


def test_a_script_killed_by_a_signal_says_which(tmp_path, run_xlalint):
    script = _script(
        tmp_path,
        """\
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
        """,
    )
    outcome = run_xlalint(script, fix=False)
    assert outcome.status == 1
    assert "killed by SIGKILL" in outcome.stdout


HANGS_WITH_A_GRANDCHILD = """\
import subprocess, sys, time
sleeper = subprocess.Popen(["sleep", "300"])
with open(sys.argv[1], "w") as file:
    file.write(str(sleeper.pid))
print("waiting forever", flush=True)
time.sleep(300)
"""


def test_a_hanging_script_is_killed_at_the_timeout_with_its_children(tmp_path, run_xlalint, wait_until_gone):
    script = _script(tmp_path, HANGS_WITH_A_GRANDCHILD)
    pid_file = tmp_path / "sleeper.pid"
    started = time.monotonic()
    outcome = run_xlalint(script, fix=False, timeout_s=3, script_args=[str(pid_file)])
    assert time.monotonic() - started < 20
    assert outcome.status == 1
    assert "timed out after 3 s: killed" in outcome.stdout
    assert wait_until_gone(int(pid_file.read_text())), "the script's `sleep` outlived the run"


def test_processes_the_script_leaves_behind_are_killed(tmp_path, run_xlalint, wait_until_gone):
    script = _script(
        tmp_path,
        """\
        import subprocess, sys
        sleeper = subprocess.Popen(["sleep", "300"])
        open(sys.argv[1], "w").write(str(sleeper.pid))
        """,
    )
    pid_file = tmp_path / "sleeper.pid"
    outcome = run_xlalint(script, fix=False, script_args=[str(pid_file)])
    assert outcome.status == 0
    assert "the script left processes running; they were killed" in outcome.stdout
    assert wait_until_gone(int(pid_file.read_text()))


def test_stopping_xlalint_run_stops_the_script(tmp_path, wait_until_gone):
    """SIGTERM (or Ctrl-C) to `xlalint run` kills the script's whole process group."""
    script = _script(tmp_path, HANGS_WITH_A_GRANDCHILD)
    pid_file = tmp_path / "sleeper.pid"
    command = [sys.executable, "-m", "xlalint.cli", "run", "--no-fix", str(script), "--", str(pid_file)]
    xlalint = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    xlalint.send_signal(signal.SIGTERM)
    _, stderr = xlalint.communicate(timeout=30)
    assert xlalint.returncode == 130
    assert "interrupted; the script's processes were killed" in stderr
    assert wait_until_gone(int(pid_file.read_text()))


# `start_new_session=True` is `setsid`: the sleeper leaves the script's process group.
HANGS_WITH_A_SETSID_GRANDCHILD = """\
import os, subprocess, sys, time
sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
with open(sys.argv[1], "w") as file:
    file.write(f"{os.getpid()} {sleeper.pid}")
time.sleep(float(sys.argv[2]))
"""


def _pids(pid_file: Path, seconds: float = 60) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = pid_file.read_text() if pid_file.exists() else ""
        if len(text.split()) == 2:
            return [int(pid) for pid in text.split()]
        time.sleep(0.1)
    raise AssertionError("the script did not start")


def test_a_setsid_grandchild_is_killed_at_the_timeout(tmp_path, run_xlalint, wait_until_gone):
    script = _script(tmp_path, HANGS_WITH_A_SETSID_GRANDCHILD)
    pid_file = tmp_path / "pids"
    outcome = run_xlalint(script, fix=False, timeout_s=3, script_args=[str(pid_file), "300"])
    assert outcome.status == 1
    assert "timed out after 3 s: killed" in outcome.stdout
    script_pid, sleeper = _pids(pid_file)
    assert wait_until_gone(script_pid)
    assert wait_until_gone(sleeper), "a setsid'd grandchild outlived the timeout"


def test_a_setsid_grandchild_left_behind_is_killed(tmp_path, run_xlalint, wait_until_gone):
    script = _script(tmp_path, HANGS_WITH_A_SETSID_GRANDCHILD)
    pid_file = tmp_path / "pids"
    outcome = run_xlalint(script, fix=False, script_args=[str(pid_file), "0"])
    assert outcome.status == 0
    assert "the script left processes running; they were killed" in outcome.stdout
    assert wait_until_gone(_pids(pid_file)[1]), "a setsid'd grandchild outlived the run"


# A grandchild in its own session with an empty environment: neither the script's
# process group nor the run's token (an environment variable) finds it.
LEAVES_AN_UNMARKED_SETSID_GRANDCHILD = """\
import subprocess, sys
subprocess.run(["sh", "-c", f"setsid env -i sleep 300 >/dev/null 2>&1 & echo $! > {sys.argv[1]}"], check=True)
"""


def test_a_setsid_grandchild_with_an_empty_environment_is_killed(tmp_path, run_xlalint, wait_until_gone):
    script = _script(tmp_path, LEAVES_AN_UNMARKED_SETSID_GRANDCHILD)
    pid_file = tmp_path / "sleeper.pid"
    outcome = run_xlalint(script, fix=False, script_args=[str(pid_file)])
    sleeper = int(pid_file.read_text())
    try:
        assert outcome.status == 0, outcome.stderr
        assert wait_until_gone(sleeper, 2), "an orphan in its own session with `env -i` outlived the run"
        assert f"the script left processes running; they were killed (pid {sleeper})" in outcome.stdout
    finally:
        with contextlib.suppress(OSError):
            os.kill(sleeper, signal.SIGKILL)


def test_without_a_subreaper_the_report_does_not_claim_what_it_cannot_know(
    tmp_path, run_xlalint, wait_until_gone, monkeypatch
):
    from xlalint.harness import cleanup

    monkeypatch.setattr(cleanup, "_subreaper", lambda: None)  # as on a system without prctl
    script = _script(tmp_path, LEAVES_AN_UNMARKED_SETSID_GRANDCHILD)
    pid_file = tmp_path / "sleeper.pid"
    outcome = run_xlalint(script, fix=False, script_args=[str(pid_file)])
    sleeper = int(pid_file.read_text())
    try:
        assert "they were killed" not in outcome.stdout
        assert "cannot be found on this system; any such process was not killed" in outcome.stdout
    finally:
        with contextlib.suppress(OSError):
            os.kill(sleeper, signal.SIGKILL)


def test_a_process_that_survives_sigkill_is_reported_as_not_killed():
    from xlalint.harness.cleanup import Leftovers
    from xlalint.harness.results import RunResult

    run = RunResult("fixed", "fixed", 0, 1.0, None, [], leftovers=Leftovers(killed=(10,), not_killed=(11, 12)))
    assert run.leftover_notes() == [
        "the script left processes running; they were killed (pid 10)",
        "the script left processes running that could not be killed: pid 11, 12 still running",
    ]
    assert run.to_json()["leftovers"] == {"killed": [10], "not_killed": [11, 12], "tracked": True}


def _start_xlalint_run(tmp_path: Path, pid_file: Path) -> tuple[subprocess.Popen, Path]:
    script = _script(tmp_path, HANGS_WITH_A_SETSID_GRANDCHILD)
    temp = tmp_path / "tmp"
    temp.mkdir()
    command = [sys.executable, "-m", "xlalint.cli", "run", "--no-fix", str(script), "--", str(pid_file), "300"]
    xlalint = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    return xlalint, temp


def _gone_within(seconds: float, check) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_sigkill_of_xlalint_run_kills_the_script_and_removes_its_temp_folder(tmp_path, wait_until_gone):
    pid_file = tmp_path / "pids"
    xlalint, temp = _start_xlalint_run(tmp_path, pid_file)
    try:
        script_pid, sleeper = _pids(pid_file)
        assert [path.name.startswith(f"xlalint-run-{xlalint.pid}-") for path in temp.iterdir()] == [True]
        xlalint.kill()
        xlalint.communicate(timeout=30)
    finally:
        if xlalint.poll() is None:
            xlalint.kill()
    assert wait_until_gone(script_pid), "the script outlived a SIGKILL of xlalint run"
    assert wait_until_gone(sleeper), "the script's setsid'd child outlived a SIGKILL of xlalint run"
    assert _gone_within(10, lambda: not list(temp.iterdir())), "the temp folder was left behind"


# Issue 29: the watchdog finds processes by the token in their environment; one in a
# new session with an emptied environment outlived a SIGKILL of xlalint run.
STARTS_AN_UNMARKED_SETSID_GRANDCHILD_AND_HANGS = """\
import subprocess, sys, time
subprocess.run(["sh", "-c", f"setsid env -i sleep 300 >/dev/null 2>&1 & echo $! > {sys.argv[1]}"], check=True)
time.sleep(300)
"""


def test_sigkill_of_xlalint_run_kills_a_grandchild_in_a_new_session_with_an_empty_environment(
    tmp_path, wait_until_gone
):
    script = _script(tmp_path, STARTS_AN_UNMARKED_SETSID_GRANDCHILD_AND_HANGS)
    pid_file = tmp_path / "sleeper.pid"
    command = [sys.executable, "-m", "xlalint.cli", "run", "--no-fix", str(script), "--", str(pid_file)]
    xlalint = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _gone_within(120, lambda: pid_file.exists() and pid_file.read_text().strip()), "no sleeper"
        sleeper = int(pid_file.read_text())
        xlalint.kill()
        xlalint.wait(timeout=30)
        try:
            # 30 s: the watchdog's sweep took over 5 s on a 2-core machine at load 12 (a flake).
            assert wait_until_gone(sleeper, 30), "a setsid'd grandchild with `env -i` outlived a SIGKILL of xlalint run"
        finally:
            with contextlib.suppress(OSError):
                os.kill(sleeper, signal.SIGKILL)
    finally:
        if xlalint.poll() is None:
            xlalint.kill()


def test_sighup_to_xlalint_run_is_handled_like_sigterm(tmp_path, wait_until_gone):
    pid_file = tmp_path / "pids"
    xlalint, temp = _start_xlalint_run(tmp_path, pid_file)
    try:
        script_pid, sleeper = _pids(pid_file)
        xlalint.send_signal(signal.SIGHUP)
        _, stderr = xlalint.communicate(timeout=30)
    finally:
        if xlalint.poll() is None:
            xlalint.kill()
    assert xlalint.returncode == 130
    assert "interrupted; the script's processes were killed" in stderr
    assert wait_until_gone(script_pid) and wait_until_gone(sleeper)
    assert not list(temp.iterdir())


def test_stale_temp_folders_of_dead_runs_are_removed(tmp_path):
    from xlalint.harness.cleanup import remove_stale_temp_folders

    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid names no process now
    dead = tmp_path / f"xlalint-run-{finished.pid}-abc"
    (dead / "fixed").mkdir(parents=True)
    (dead / "fixed" / "train.py").write_text("x = 1\n")
    alive = tmp_path / f"xlalint-run-{os.getpid()}-def"
    alive.mkdir()
    not_ours = tmp_path / "xlalint-run-notapid"
    not_ours.mkdir()
    other = tmp_path / f"pytest-{finished.pid}-x"
    other.mkdir()
    link = tmp_path / f"xlalint-run-{finished.pid}-link"
    link.symlink_to(other)
    assert remove_stale_temp_folders(tmp_path) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, not_ours.name, other.name, link.name])


def test_script_arguments_after_the_double_dash_reach_the_script(tmp_path, xlalint_command):
    script = _script(tmp_path, "import sys\nprint('argv', sys.argv[1:])\n")
    done = xlalint_command("run", "--no-fix", str(script), "--", "--epochs", "1", "-x")
    assert done.returncode == 0, done.stderr
    assert "argv ['--epochs', '1', '-x']" in done.stdout + done.stderr


def test_torch_xla_missing_from_the_interpreter(tmp_path, run_xlalint, monkeypatch):
    """XLALINT_PYTHON names the interpreter that runs the script; this one has no torch."""
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False, symlinks=True)
    monkeypatch.setenv("XLALINT_PYTHON", str(bare / "bin" / "python"))
    script = _script(tmp_path, "print('never runs')\n")
    outcome = run_xlalint(script, fix=False)
    assert outcome.status == 2
    (line,) = outcome.stderr.strip().splitlines()
    # From this source tree the hint installs the extra from it (xlalint is not on PyPI).
    assert f"torch is not installed: {install_command('harness')} (torch==2.9.0 torch-xla==2.9.0)" in line
    assert "pip install -e '" in line and "[harness]'" in line


def test_torch_xla_that_fails_to_import_in_the_script(tmp_path, run_xlalint, monkeypatch):
    """A torch_xla that is there but cannot be imported (shadowed here by one that raises)."""
    shadow = tmp_path / "shadow"
    (shadow / "torch_xla").mkdir(parents=True)
    (shadow / "torch_xla" / "__init__.py").write_text(
        "raise ImportError('libtpu.so: cannot open shared object file (simulated)')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    script = _script(tmp_path, "import torch_xla\n")
    outcome = run_xlalint(script, fix=False)
    assert outcome.status == 2
    assert "torch_xla cannot be imported in the script's process" in outcome.stderr
    assert "(simulated)" in outcome.stderr
    assert install_command("harness") in outcome.stderr


def test_an_import_error_of_the_scripts_own_module_is_a_script_failure(tmp_path, run_xlalint):
    script = _script(tmp_path, "import module_that_is_not_there\n")
    outcome = run_xlalint(script, fix=False)
    assert outcome.status == 1
    assert "No module named 'module_that_is_not_there'" in outcome.stdout


def test_mismatched_torch_and_torch_xla(tmp_path, run_xlalint, monkeypatch):
    """Simulated with the metadata of a torch_xla 2.8.0 ahead of the real one on the path."""
    shadow = tmp_path / "shadow"
    metadata = shadow / "torch_xla-2.8.0.dist-info"
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text("Metadata-Version: 2.1\nName: torch_xla\nVersion: 2.8.0\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    script = _script(tmp_path, "print('never runs')\n")
    outcome = run_xlalint(script, fix=False)
    assert outcome.status == 2
    (line,) = outcome.stderr.strip().splitlines()
    assert "does not match torch_xla 2.8.0" in line
    assert f"{install_command('harness')} (torch==2.9.0 torch-xla==2.9.0)" in line


def test_device_cuda_without_plugin_or_gpu_says_what_is_missing(tmp_path, xlalint_command):
    script = _script(tmp_path, "print('never runs')\n")
    done = xlalint_command("run", "--device", "cuda", str(script))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("xlalint: error: --device cuda: no PJRT CUDA plugin is installed")
    assert f"the `harness-cuda` extra has it: {install_command('harness-cuda')})" in line
    if not os.path.exists("/dev/nvidia0"):
        assert "no NVIDIA GPU is visible" in line
    assert "never runs" not in done.stdout + done.stderr


def test_a_notebook_is_refused_with_what_to_do(tmp_path, run_xlalint):
    # Issue 29: its JSON ran as Python (a dict literal: nothing ran) and the report said "none".
    notebook = tmp_path / "nb.ipynb"
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["import torch\n", "open('ran', 'w')\n"]}
    notebook.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    outcome = run_xlalint(notebook)
    assert outcome.status == 2 and outcome.stdout == ""
    assert outcome.stderr == (
        f"xlalint: error: {notebook} is a notebook: `xlalint run` runs Python scripts. Export it "
        f"(jupyter nbconvert --to script {notebook}) and run the .py; `xlalint check`/`fix` read notebooks as they are\n"
    )
    assert not (tmp_path / "ran").exists()


def test_compare_with_no_fix_is_a_usage_error(tmp_path, run_xlalint):
    script = _script(tmp_path, "print('never runs')\n")
    outcome = run_xlalint(script, fix=False, compare=True)
    assert outcome.status == 2
    assert "--compare runs the original and the fixed script" in outcome.stderr


def test_json_report_of_a_failed_run(tmp_path, run_xlalint):
    script = _script(tmp_path, "import sys\nsys.exit(4)\n")
    report_path = tmp_path / "report.json"
    outcome = run_xlalint(script, fix=False, json_path=report_path)
    assert outcome.status == 1
    report = json.loads(report_path.read_text())
    run = report["runs"]["original"]
    assert run["exit_code"] == 4
    assert run["compiles"] is None  # no metrics: the script never imported torch_xla
    assert list(report["runs"]) == ["original"]
