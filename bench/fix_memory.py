"""Peak memory (RSS) and time of ``xlalint fix`` and ``check`` against file size, in one run.

Each measurement is one ``xlalint`` command in a fresh process, started by a small
wrapper process that prints ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` once its
only child has ended: the peak resident memory of that command alone (no pool: one
file). Shapes (issue 40 §2):

- ``lines``: N lines, each with one fixable ``.cuda()``;
- ``blocks``: ``fix_speed.py``'s block of four fixable findings, repeated;
- ``list``: one list literal of N elements on one line (no fix; ``check`` only);
- ``names``: one fixable line, then a list of N names ``[a,a,...]`` (the densest
  shape for both parsers: ``check`` and ``fix``, which parses the whole file for one fix);
- ``calls``: one fixable line, then N lines ``f(a,b)``.

It prints, for each shape and size, the bytes, the peak RSS in MB, the seconds, the KB
of peak memory per line and the time per line relative to the smallest size; then the
slope (KB of memory per KB of input) fitted between the two largest sizes, which is
what ``xlalint.engine.memory`` budgets with. Each row says whether the peak stayed
within that module's estimate for the file (``BASE`` plus bytes times the bytes of
memory per byte it assumes), which is what keeps the worst case in the budget.

    python bench/fix_memory.py [--lines 2000,5000,10000,20000] [--blocks 500,2000] [--list 100000,400000]
                               [--names 32768,131072] [--calls 4681,18724]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commands import COMMAND_ENV

from xlalint.engine import memory

HEADER = "import torch\n\n"
BLOCK = """

def step_{i}(model, batch):
    model = model.cuda()
    inputs = batch["x"].cuda(non_blocking=True)
    labels = batch["y"].to("cuda")
    for name, p in model.named_parameters():
        p.data = p.data.cuda()
    return model(inputs), labels
"""
WRAPPER = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(peak, done.returncode, done.stderr.decode(errors='replace').strip().splitlines()[-1:] or [''], sep='\\t')\n"
)


def lines_shape(n: int) -> str:
    return HEADER + "".join(f"x{i} = t.cuda()\n" for i in range(n))


def blocks_shape(n: int) -> str:
    return HEADER + "".join(BLOCK.format(i=i) for i in range(n))


def list_shape(n: int) -> str:
    return HEADER + "xs = [" + ", ".join(str(i) for i in range(n)) + "]\n"


FIXABLE = "m = torch.nn.Linear(2, 2).cuda()\n"


def names_shape(n: int) -> str:
    return HEADER + FIXABLE + "xs = [" + "a," * n + "]\n"


def calls_shape(n: int) -> str:
    return HEADER + FIXABLE + "f(a,b)\n" * n


SHAPES = {"lines": lines_shape, "blocks": blocks_shape, "list": list_shape, "names": names_shape, "calls": calls_shape}


def measure(command: str, path: Path, extra: tuple[str, ...] = ()) -> tuple[float, float, int, str]:
    """Peak RSS (MB) and seconds of ``xlalint COMMAND path``, its exit status and last
    line on stderr."""
    args = [sys.executable, "-m", "xlalint.cli", command, "--no-cache", *extra, str(path)]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args], env=COMMAND_ENV, capture_output=True, text=True, check=True
    )
    seconds = time.perf_counter() - start
    peak_kb, status, last = done.stdout.rstrip("\n").split("\t", 2)
    return int(peak_kb) / 1024, seconds, int(status), last.strip("[]'\"")


def run_shape(name: str, sizes: list[int], commands: tuple[str, ...], folder: Path) -> None:
    print(f"\n## {name}")
    print(
        "| command | N | KB | lines | peak MB | seconds | KB per line | s per 1k lines | estimate MB | within | status |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for command in commands:
        points = []
        for n in sizes:
            text = SHAPES[name](n)
            path = folder / f"{name}_{n}.py"
            path.write_text(text)
            lines = text.count("\n")
            peak, seconds, status, last = measure(command, path)
            points.append((len(text), peak, seconds))
            per_line = 1024 * peak / lines
            per_byte = memory.FIX_BYTES_PER_BYTE if command == "fix" else memory.CHECK_BYTES_PER_BYTE
            estimate = (memory.BASE + len(text) * per_byte) / 2**20
            print(
                f"| {command} | {n} | {len(text) // 1024} | {lines} | {peak:.0f} | {seconds:.1f} | "
                f"{per_line:.1f} | {1000 * seconds / lines:.2f} | {estimate:.0f} | {peak <= estimate} | "
                f"{status} {last[:60]} |"
            )
        if len(points) >= 2:
            (small_bytes, small_peak, small_s), (big_bytes, big_peak, big_s) = points[-2], points[-1]
            slope = (big_peak - small_peak) * 2**20 / max(big_bytes - small_bytes, 1)
            growth = (big_s / big_bytes) / (small_s / small_bytes)
            print(
                f"\n{command} {name}: {slope:.0f} bytes of memory per byte of input between the two largest; "
                f"time per byte grows {growth:.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="2000,5000,10000,20000")
    parser.add_argument("--blocks", default="500,2000")
    parser.add_argument("--list", default="100000,400000")
    parser.add_argument("--names", default="32768,131072")
    parser.add_argument("--calls", default="4681,18724")
    args = parser.parse_args()
    print(
        f"memory budget {memory.budget() / 2**30:g} GiB: check up to {memory.check_limit() / 2**20:.1f} MiB, "
        f"fix up to {memory.fix_limit() / 2**20:.2f} MiB"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shapes = (
            ("lines", ("check", "fix")),
            ("blocks", ("check", "fix")),
            ("list", ("check",)),
            ("names", ("check", "fix")),
            ("calls", ("check", "fix")),
        )
        for name, commands in shapes:
            sizes = [int(n) for n in getattr(args, name).split(",") if n]
            if sizes:
                run_shape(name, sizes, commands, folder)


if __name__ == "__main__":
    main()
