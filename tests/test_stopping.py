"""Stopping means stopping (issue 22 item 1): `xlalint fix` on many files, killed
mid-run by SIGKILL, SIGTERM or SIGINT (a terminal's Ctrl-C, to the whole process
group), writes no file after the signal, leaves no worker behind, and every file is
either as it was or completely fixed. SIGTERM and SIGINT exit 143 and 130 with one line
saying how many files were written, which is how many were."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xlalint.engine import stopping

FILES = 240
ORIGINAL = "import torch\n\n\ndef step_{i}():\n    x = torch.ones(2).cuda()\n    return x\n"
FIXED = (
    "import torch\nimport torch_xla\n\n\ndef step_{i}():\n    x = torch.ones(2).to(torch_xla.device())\n    return x\n"
)


def _states(folder: Path) -> dict[str, str]:
    """Each file: "original", "fixed", or what else it holds (a failure)."""
    states = {}
    for i in range(FILES):
        text = (folder / f"m{i:03d}.py").read_text()
        states[f"m{i:03d}.py"] = (
            "original" if text == ORIGINAL.format(i=i) else "fixed" if text == FIXED.format(i=i) else text
        )
    return states


def _group_alive(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_fix_at_once(tmp_path, signum):
    folder = tmp_path / "src"
    folder.mkdir()
    for i in range(FILES):
        (folder / f"m{i:03d}.py").write_text(ORIGINAL.format(i=i))
    env = {**os.environ, "PYTHONPATH": str(Path(stopping.__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "xlalint", "fix", "--no-cache", "-q", "src"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: its workers are found by it
    )
    pgid = proc.pid
    try:
        deadline = time.monotonic() + 240
        while sum(s == "fixed" for s in _states(folder).values()) < 3:
            assert proc.poll() is None, "finished before it could be stopped: make the run longer"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert len(_group_alive(pgid)) >= 2  # the main process and its pool
        if signum == signal.SIGINT:
            os.killpg(pgid, signum)  # as a terminal's Ctrl-C: the whole group
        else:
            os.kill(proc.pid, signum)
        _, stderr = proc.communicate(timeout=30)
        at_exit = _states(folder)
        time.sleep(1.5)  # orphaned workers, had there been any, would go on writing
        assert _states(folder) == at_exit, "files were written after the process was stopped"
        assert _group_alive(pgid) == [], "a worker survived"
    finally:
        if proc.poll() is None or _group_alive(pgid):  # a failure leaves nothing running
            os.killpg(pgid, signal.SIGKILL)
            proc.wait()
    assert set(at_exit.values()) <= {"original", "fixed"}, "a file is neither original nor fixed"
    fixed = sum(state == "fixed" for state in at_exit.values())
    assert 0 < fixed < FILES
    if signum == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 128 + signum
    assert len(stderr.decode().strip().splitlines()) == 1, stderr.decode()
    [line] = stderr.decode().strip().splitlines()
    name = signal.Signals(signum).name
    assert re.fullmatch(rf"xlalint: stopped by {name}: {fixed} files? written", line), line


def test_interrupted_says_how_many_files():
    assert stopping.Interrupted(signal.SIGINT, 1).message() == "xlalint: stopped by SIGINT: 1 file written"
    assert stopping.Interrupted(signal.SIGTERM, 0).exit_code == 143


def test_a_closed_gate_writes_nothing(tmp_path):
    from xlalint.engine import source as sourcefile

    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    original = sourcefile.read(path)
    stopping.GATE.open()
    try:
        sourcefile.write_atomic(path, original, "x = 2\n")
        assert stopping.GATE.close() == 1
        with pytest.raises(stopping.WritesStopped):
            sourcefile.write_atomic(path, sourcefile.read(path), "x = 3\n")
    finally:
        stopping.GATE.open()
    assert path.read_text() == "x = 2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]  # the temp file went too
