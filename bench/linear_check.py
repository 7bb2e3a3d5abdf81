"""How check time grows with the file, as ratios: 8x the file should take at most 10x the time.

Two generated files, each checked (``lint_source``, every rule, one core) at --small
and --large copies of a block, best of --repeat runs:

- step functions: each a small training loop that prints ``loss.item()``, so XLA102
  reports (and builds a fix for) every copy (issue 22: 100 functions took 2.1 s, 800
  took 53.6 s);
- trainers: each copy adds a helper, a class whose ``fit`` loop calls its ``step``
  method (a GradScaler, a clip: XLA104, XLA106), and a function that iterates an
  ``MpDeviceLoader`` of a ``DataLoader`` (XLA102, XLA202): the analyses that follow
  calls across functions and methods.

It ends with a table of the targets and whether each is met.

    python bench/linear_check.py [--small 100] [--large 800] [--repeat 2]
"""

from __future__ import annotations

import argparse
import gc
import time

from xlalint.linter.config import Settings
from xlalint.linter.engine import lint_source

STEP_HEADER = "import torch\nimport torch_xla.core.xla_model as xm\n"
STEP_FUNCTION = """

def train_{i}(model, loader, opt):
    device = xm.xla_device()
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        loss = model(x.to(device), y.to(device))
        loss.backward()
        opt.step()
        xm.mark_step()
        print(step, loss.item())
"""

TRAINER_HEADER = (
    "import torch\nimport torch_xla.core.xla_model as xm\n"
    "import torch_xla.distributed.parallel_loader as pl\nimport torch_xla.distributed.xla_multiprocessing as xmp\n"
)
TRAINER = """

def forward_{i}(model, x, y):
    return model(x, y)


class Trainer{i}:
    def __init__(self, model):
        self.model = model
        self.scaler = torch.cuda.amp.GradScaler()

    def step(self, x, y, opt):
        loss = forward_{i}(self.model, x, y)
        self.scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.scaler.step(opt)
        self.scaler.update()
        return loss

    def fit(self, loader, opt):
        for x, y in loader:
            loss = self.step(x, y, opt)
            print(loss.item())


def train_{i}(model, loader, opt):
    device = xm.xla_device()
    loader = torch.utils.data.DataLoader(dataset_{i}, batch_size=8)
    for step, (x, y) in enumerate(pl.MpDeviceLoader(loader, device)):
        opt.zero_grad()
        loss = forward_{i}(model, x.to(device), y.to(device))
        loss.backward()
        opt.step()
        xm.mark_step()
        print(step, loss.item())
    Trainer{i}(model).fit(loader, opt)
"""
TRAINER_TAIL = "\n\ndef _mp_fn(index):\n    train_0(None, None, None)\n\n\nxmp.spawn(_mp_fn)\n"

SHAPES = {
    "step functions": (STEP_HEADER, STEP_FUNCTION, ""),
    "trainers": (TRAINER_HEADER, TRAINER, TRAINER_TAIL),
}


def generated(shape: str, copies: int) -> str:
    header, block, tail = SHAPES[shape]
    return header + "".join(block.format(i=i) for i in range(copies)) + tail


def best_check(source: str, repeat: int) -> tuple[float, int]:
    """Best wall time of ``repeat`` checks, and the number of findings."""
    best, findings = float("inf"), 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        findings = len(lint_source(source, "generated.py", Settings()))
        best = min(best, time.perf_counter() - start)
    return best, findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=800)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    lint_source(generated("trainers", 2), "warm.py", Settings())  # imports and rule registry, not timed
    growth = args.large / args.small
    print("| file | copies | KB | findings | seconds | ms per copy |")
    print("|------|-------:|---:|---------:|--------:|------------:|")
    ratios = {}
    for shape in SHAPES:
        seconds = {}
        for copies in (args.small, args.large):
            source = generated(shape, copies)
            seconds[copies], findings = best_check(source, args.repeat)
            print(
                f"| {shape} | {copies} | {len(source) // 1024} | {findings} | {seconds[copies]:.2f} "
                f"| {1000 * seconds[copies] / copies:.1f} |"
            )
        ratios[shape] = seconds[args.large] / seconds[args.small]
    print("\n| target | measured | met |")
    print("|---|---|---|")
    for shape, ratio in ratios.items():
        bar = 10 * growth / 8
        print(f"| {shape}: {growth:g}x the file in at most {bar:g}x the time | {ratio:.1f}x | {ratio <= bar} |")


if __name__ == "__main__":
    main()
