"""Parsing torch_xla 2.9.0's PT_XLA_DEBUG_LEVEL=2 output (text captured from a real run)."""

from __future__ import annotations

import tracemalloc

from xlalint.harness.debug_log import Frame, parse_debug_files, parse_debug_text

# Captured from a run; torch_xla ends two of the lines with a space (written \x20 here).
CAPTURED = """\
Compilation Analysis: ================================================================================
Compilation Analysis: Compilation Cause
Compilation Analysis:   most likely user code trying to access tensor value before torch_xla.sync
Compilation Analysis: Graph Info:\x20
Compilation Analysis:   Graph Hash: 160ba9d1b925edbfcb449d1634dd5252
Compilation Analysis:   Number of Graph Inputs: 1
Compilation Analysis:   Number of Graph Outputs: 1
Compilation Analysis: Python Frame Triggered Execution:\x20
Compilation Analysis:   <module> (/tmp/exp/t2.py:12)
Compilation Analysis:   _run_code (<frozen runpy>:88)
Compilation Analysis:   run_path (<frozen runpy>:291)
Compilation Analysis: --------------------------------------------------------------------------------
Compilation Analysis: ================================================================================

Computation hash: 7e89887d2cc97ca241f7f127d9267699

Post Compilation Analysis: ================================================================================
Post Compilation Analysis: Graph input size: 0.000000 GB
Post Compilation Analysis: Compiled program size: 0.000000 GB
Post Compilation Analysis: --------------------------------------------------------------------------------
Post Compilation Analysis: ================================================================================

Execution Analysis: ================================================================================
Execution Analysis: Execution Cause
Execution Analysis:   user torch_xla.sync
Execution Analysis: Graph Info:\x20
Execution Analysis:   Graph Hash: 150901265642a1b2a1bd733103bbb1cb
Execution Analysis:   Number of Graph Inputs: 1
Execution Analysis:   Number of Graph Outputs: 4
Execution Analysis: Python Frame Triggered Execution:\x20
Execution Analysis:   sync (/venv/lib/python3.11/site-packages/torch_xla/torch_xla.py:87)
Execution Analysis:   _mp_fn (/tmp/my dir/train.py:14)
Execution Analysis: --------------------------------------------------------------------------------
Execution Analysis: ================================================================================
"""


def test_blocks_become_causes_with_frames_innermost_first():
    causes = parse_debug_text(CAPTURED)
    assert [(c.kind, c.cause) for c in causes] == [
        ("compilation", "most likely user code trying to access tensor value before torch_xla.sync"),
        ("execution", "user torch_xla.sync"),
    ]
    assert causes[0].frames[0] == Frame("<module>", "/tmp/exp/t2.py", 12)
    assert causes[0].frames[1] == Frame("_run_code", "<frozen runpy>", 88)
    # Paths with spaces; the library frame comes first.
    assert causes[1].frames == [
        Frame("sync", "/venv/lib/python3.11/site-packages/torch_xla/torch_xla.py", 87),
        Frame("_mp_fn", "/tmp/my dir/train.py", 14),
    ]


def test_post_compilation_blocks_and_other_lines_are_ignored():
    text = "\n".join(line for line in CAPTURED.splitlines() if not line.startswith(("Compilation", "Execution")))
    assert parse_debug_text(text) == []


def test_a_block_without_frames_has_none():
    text = (
        "Execution Analysis: Execution Cause\n"
        "Execution Analysis:   user torch_xla.sync\n"
        "Execution Analysis: Python Frame Triggered Execution: \n"
        "Execution Analysis: ------------------\n"
    )
    (cause,) = parse_debug_text(text)
    assert cause.frames == []


def test_files_of_several_processes_are_read(tmp_path):
    (tmp_path / "debug-1.log").write_text(CAPTURED)
    (tmp_path / "debug-2.log").write_text(CAPTURED)
    assert len(parse_debug_files(sorted(tmp_path.glob("debug-*.log")))) == 4


def test_a_debug_log_is_read_a_line_at_a_time(tmp_path):
    # Issue 29: a run's debug log can be gigabytes; reading it whole held it (and its
    # decoded text) in memory. 40 MB of log is parsed in a few MB, one line too long cut.
    path = tmp_path / "debug-1.log"
    with open(path, "w", encoding="utf-8") as file:
        file.write("x" * 5_000_000 + "\n")
        for _ in range(40_000):
            file.write("Execution Analysis: " + "unrelated text " * 60 + "\n")
        file.write(CAPTURED)
    tracemalloc.start()
    try:
        causes = parse_debug_files([path])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert causes == parse_debug_text(CAPTURED)  # the unrelated lines are no blocks
    assert peak < 4_000_000, f"{peak / 1e6:.1f} MB held to parse a {path.stat().st_size / 1e6:.0f} MB log"
