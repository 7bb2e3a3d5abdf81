"""What `xlalint run` shows of the script's output: a bounded amount held, whatever it
prints (issue 29: 1 GiB of stdout took 3 GB of memory: the tails and the debug log were
read whole), and the exception that ended it (issue 28: the tail showed only the end of
a long IR dump)."""

from __future__ import annotations

import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from xlalint.harness.runner import output_tail, stderr_tail

ROOT = Path(__file__).resolve().parents[2]

# Prints 200 MB to stdout and 100 MB to stderr, in 1 MB writes, then fails.
LOUD = """\
import sys
line = "x" * 1023 + "\\n"
block = line * 1024
for _ in range(200):
    sys.stdout.write(block)
for _ in range(100):
    sys.stderr.write(block)
sys.stdout.write("the last line of stdout\\n")
sys.stdout.flush()
raise SystemExit("the end")
"""

# `xlalint run` in this process; prints how much more memory it took at its peak than
# before (ru_maxrss is in KiB on Linux).
MEASURE = """\
import io, os, resource, sys
from pathlib import Path
from xlalint.harness.session import RunOptions, run
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open(os.devnull, "w") as echo:  # the script's output is echoed to stderr as it runs
    status = run(RunOptions(script=Path(sys.argv[1]), fix=False), stdout=io.StringIO(), stderr=echo)
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(status, grew * 1024)
"""


@pytest.mark.usefixtures("torch_xla_required")
def test_memory_stays_bounded_whatever_the_script_prints(tmp_path):
    script = tmp_path / "loud.py"
    script.write_text(LOUD)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # Import the harness first, so that the baseline counts it.
    code = "import xlalint.harness.session, xlalint.harness.runner\n" + MEASURE
    done = subprocess.run(
        [sys.executable, "-c", code, str(script)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    status, grew = map(int, done.stdout.split())
    assert status == 1  # the script failed; its output was read all the same
    assert grew < 100 * 2**20, f"{grew / 2**20:.0f} MiB more at the peak for 300 MiB of output"


def test_the_tail_of_an_output_file_is_read_from_its_end(tmp_path):
    path = tmp_path / "stdout.txt"
    with open(path, "w") as file:
        file.write(("y" * 99 + "\n") * 400_000)  # 40 MB
        file.write("one before the last\nthe last\n")
    tracemalloc.start()
    try:
        tail = output_tail(path, 2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert tail == "one before the last\nthe last"
    assert peak < 1_000_000, f"{peak / 1e6:.1f} MB held to read the last lines of a 40 MB file"


IR_DUMP_TRACEBACK = """\
Traceback (most recent call last):
  File "/home/me/train.py", line 40, in <module>
    main()
  File "/home/me/train.py", line 31, in main
    loss = model(batch).sum()
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _call_impl
    return forward_call(*args, **kwargs)
  File "/venv/lib/python3.11/site-packages/torch_xla/core/xla_model.py", line 12, in mark_step
    torch_xla._XLAC._xla_step_marker()
RuntimeError: Bad StatusOr access: INTERNAL: during lowering of the graph
"""


def test_the_stderr_tail_shows_the_exception_and_the_users_frame_before_a_long_dump(tmp_path):
    path = tmp_path / "stderr.txt"
    dump = "".join(f"  %{n} = f32[4]{{0}} xla::add(%{n - 1}, %{n - 1})\n" for n in range(1, 400))
    path.write_text("warming up\n" + IR_DUMP_TRACEBACK + dump)
    tail = stderr_tail(path, 5).splitlines()
    assert tail[:5] == [
        "Traceback (most recent call last):",
        '  File "/home/me/train.py", line 31, in main',
        "    loss = model(batch).sum()",
        "RuntimeError: Bad StatusOr access: INTERNAL: during lowering of the graph",
        "  [...]",
    ]
    assert tail[5:] == dump.splitlines()[-5:]


def test_the_stderr_tail_is_the_last_lines_when_they_show_the_exception(tmp_path):
    path = tmp_path / "stderr.txt"
    path.write_text("noise\n" * 50 + IR_DUMP_TRACEBACK)
    assert stderr_tail(path, 10) == IR_DUMP_TRACEBACK.rstrip("\n")
    (tmp_path / "clean.txt").write_text("noise\n" * 50 + "done\n")
    assert stderr_tail(tmp_path / "clean.txt", 2) == "noise\ndone"
