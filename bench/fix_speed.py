"""How fix time grows with the file, and what machine-readable output costs, as ratios.

- ``fix`` of a file made of a fixable block repeated 100, 200, 400 and 2,000 times
  (the last about 600 KB): seconds per copy should stay flat (linear time);
- ``fix`` of one line holding 5,000 fixable calls;
- ``check --output-format json|json-lines|sarif`` against ``fix --unsafe-fixes --diff``
  of the same files (every fixture, and torch's ``distributed_test.py`` when torch is
  installed), best of --repeat runs taken in turn (target: at most 1.5x).

It ends with a table of the targets and whether each is met.

    python bench/fix_speed.py [--copies 100,200,400,2000] [--calls 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commands import COMMAND_ENV

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source

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


def fix_scaling(copies: list[int]) -> dict[int, float]:
    print("| copies | KB | fixes | seconds | ms per copy |")
    print("|-------:|---:|------:|--------:|------------:|")
    seconds_by_copies = {}
    for n in copies:
        source = blocks(n)
        start = time.perf_counter()
        result = fix_source(source, "blocks.py", Settings(), unsafe=True)
        seconds = time.perf_counter() - start
        assert result.error is None, result.error
        seconds_by_copies[n] = seconds
        print(f"| {n} | {len(source) // 1024} | {len(result.applied)} | {seconds:.2f} | {1000 * seconds / n:.1f} |")
    return seconds_by_copies


def cli(*args: str) -> float:
    cmd = [sys.executable, "-m", "xlalint.cli", *args]
    return timed(
        lambda: subprocess.run(cmd, env=COMMAND_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    )


FORMATS = ("concise", "json", "json-lines", "sarif")


def output_cost(label: str, files: list[str], repeat: int) -> float:
    """Each output format against `fix --diff` of the same files, best of ``repeat``
    runs taken in turn; returns the worst machine-readable ratio."""
    commands = [("fix --diff", ["fix", "--unsafe-fixes", "--diff", "--no-cache", *files])]
    commands += [(fmt, ["check", "--no-cache", "--exit-zero", "--output-format", fmt, *files]) for fmt in FORMATS]
    best = dict.fromkeys((name for name, _ in commands), float("inf"))
    for _ in range(repeat):
        for name, args in commands:
            best[name] = min(best[name], cli(*args))
    base = best["fix --diff"]
    print(f"\n{label}: `fix --unsafe-fixes --diff` {base:.2f} s")
    print("| output format | seconds | x fix --diff |")
    print("|---------------|--------:|-------------:|")
    for fmt in FORMATS:
        print(f"| {fmt} | {best[fmt]:.2f} | {best[fmt] / base:.2f} |")
    return max(best[fmt] / base for fmt in FORMATS if fmt != "concise")


def torch_distributed_test() -> Path | None:
    """torch's own 2.7k-line distributed_test.py (32 fixable findings), when torch is installed."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "testing/_internal/distributed/distributed_test.py"
    return path if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", default="100,200,400,2000")
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    copies = [int(n) for n in args.copies.split(",")]
    scaling = fix_scaling(copies)
    source = one_line(args.calls)
    seconds = timed(lambda: fix_source(source, "one_line.py", Settings(), unsafe=True))
    print(f"\none line with {args.calls} fixable calls: {seconds:.2f} s")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "blocks.py").write_text(blocks(100))
        for fixture in sorted(Path(__file__).parent.parent.glob("tests/fixtures/XLA*/*.py")):
            if not fixture.name.endswith((".fixed.py", ".unsafe.py")):
                (folder / f"{fixture.parent.name}_{fixture.name}").write_text(fixture.read_text())
        files = [str(p) for p in sorted(folder.glob("*.py"))]
        ratios.append(output_cost(f"{len(files)} files (fixtures and 100 blocks)", files, args.repeat))
        big = torch_distributed_test()
        if big is not None:
            copy = folder / "big" / big.name
            copy.parent.mkdir()
            copy.write_text(big.read_text(encoding="utf-8"), encoding="utf-8")
            ratios.append(output_cost(f"torch's {big.name}", [str(copy)], args.repeat))

    smallest, largest = min(copies), max(copies)
    growth = (scaling[largest] / largest) / (scaling[smallest] / smallest)
    print("\n| target | measured | met |")
    print("|---|---|---|")
    print(f"| JSON, json-lines, SARIF at most 1.5x `fix --diff` | {max(ratios):.2f}x | {max(ratios) <= 1.5} |")
    print(f"| fix linear: time per copy at {largest} over at {smallest} | {growth:.2f} | {growth <= 1.5} |")
    if largest >= 2000:
        print(f"| the {largest}-copy file under 30 s | {scaling[largest]:.1f} s | {scaling[largest] < 30} |")


if __name__ == "__main__":
    main()
