"""How fix time grows with the file, and what machine-readable output costs, as ratios.

- ``fix`` of a file made of a fixable block repeated 100, 200, 400 and 2,000 times
  (the last about 390 KB): seconds per copy should stay flat (linear time);
- ``fix`` of one line holding 5,000 fixable calls;
- ``check --output-format json|json-lines|sarif`` against ``fix --unsafe-fixes --diff``
  of the same files, in one process each (target: at most 1.5x).

    python bench/fix_speed.py [--copies 100,200,400,2000] [--calls 5000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from xlalint.linter.config import Settings
from xlalint.linter.fixing import fix_source

HEADER = "import torch\nimport torch.nn as nn\n\n"
# One copy: four findings with fixes (XLA104), spread over a function and a loop.
BLOCK = """

def step_{i}(model, batch, scaler_{i}=None):
    device = torch.device("cuda")
    model = model.cuda()
    inputs = batch["x"].cuda(non_blocking=True)
    labels = batch["y"].to("cuda")
    for name, p in model.named_parameters():
        p.data = p.data.cuda()
    return model(inputs), labels, device
"""


def blocks(copies: int) -> str:
    return HEADER + "".join(BLOCK.format(i=i) for i in range(copies))


def one_line(calls: int) -> str:
    return HEADER + "xs = [" + ", ".join(f"t{i}.cuda()" for i in range(calls)) + "]\n"


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def fix_scaling(copies: list[int]) -> None:
    print("| copies | KB | fixes | seconds | ms per copy |")
    print("|-------:|---:|------:|--------:|------------:|")
    for n in copies:
        source = blocks(n)
        start = time.perf_counter()
        result = fix_source(source, "blocks.py", Settings(), unsafe=True)
        seconds = time.perf_counter() - start
        assert result.error is None, result.error
        print(f"| {n} | {len(source) // 1024} | {len(result.applied)} | {seconds:.2f} | {1000 * seconds / n:.1f} |")


def cli(*args: str) -> float:
    cmd = [sys.executable, "-m", "xlalint.cli", *args]
    return timed(lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False))


def output_cost(folder: Path) -> None:
    files = [str(p) for p in sorted(folder.glob("*.py"))]
    base = cli("fix", "--unsafe-fixes", "--diff", "--no-cache", *files)
    print(f"\n`fix --unsafe-fixes --diff` of {len(files)} files: {base:.2f} s")
    print("| output format | seconds | x fix --diff |")
    print("|---------------|--------:|-------------:|")
    for fmt in ("concise", "json", "json-lines", "sarif"):
        seconds = cli("check", "--no-cache", "--exit-zero", "--output-format", fmt, *files)
        print(f"| {fmt} | {seconds:.2f} | {seconds / base:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", default="100,200,400,2000")
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    fix_scaling([int(n) for n in args.copies.split(",")])
    source = one_line(args.calls)
    seconds = timed(lambda: fix_source(source, "one_line.py", Settings(), unsafe=True))
    print(f"\none line with {args.calls} fixable calls: {seconds:.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "blocks.py").write_text(blocks(100))
        for fixture in sorted(Path(__file__).parent.parent.glob("tests/fixtures/XLA*/*.py")):
            if not fixture.name.endswith((".fixed.py", ".unsafe.py")):
                (folder / f"{fixture.parent.name}_{fixture.name}").write_text(fixture.read_text())
        output_cost(folder)


if __name__ == "__main__":
    main()
