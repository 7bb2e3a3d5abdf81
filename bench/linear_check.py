"""How check and fix time grow with the file, as ratios: 8x the file should take at most 10x the time.

Generated files, each at --small and --large copies of a block (a shape may scale the
copies: the figures say how many), best of --repeat runs, after a warm-up:

- ``check`` (``lint_source``, every rule, one core) of
  - step functions: each a small training loop that prints ``loss.item()``, so XLA102
    reports (and builds a fix for) every copy (issue 22: 100 functions took 2.1 s, 800
    took 53.6 s);
  - trainers: each copy adds a helper, a class whose ``fit`` loop calls its ``step``
    method (a GradScaler, a clip: XLA104, XLA106), and a function that iterates an
    ``MpDeviceLoader`` of a ``DataLoader`` (XLA102, XLA202): the analyses that follow
    calls across functions and methods;
  - ``.cuda()`` lines: ``x = torch.zeros(3).cuda()`` repeated (issue 29: each finding
    re-scanned the earlier statements of its scope; 2,500 lines took 13.7 s, 5,000 49 s);
- ``xlalint check --output-format F`` for every format (and ``full --show-fixes``) of a
  file of fixable blocks, run in this process as the command runs;
- ``fix --unsafe-fixes`` (``fix_source``) of fixable blocks, repeated fixable lines,
  8,000 identical comment lines, blank lines, and a large file (about 1 MB at --large
  copies; issue 33: the line wrapping diffed the whole file, 800 blocks took 37 s and
  a 7 MB file did not finish in 10 minutes).

It ends with a table of the targets and whether each is met.

- the language server on an open document of fixable blocks: its diagnostics, the
  code actions at a line in the middle (each quick fix there, and fix-all to be
  resolved), and the resolve of fix-all.

    python bench/linear_check.py [--small 100] [--large 800] [--repeat 2] [--only check,formats,fix,server]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fix_speed import BLOCK as FIXABLE_BLOCK
from fix_speed import HEADER as FIXABLE_HEADER
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine.collector import collect_less_often
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.engine.reporters import FORMATS

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

CUDA_LINE = "x = torch.zeros(3).cuda()\n"
# One name rebound on every line and read by an optimizer (each read asks which
# assignment reaches it), and one name bound once and read on every line.
REBOUND_HEADER = "import torch\nimport torch_xla\nmodel = torch.nn.Linear(2, 2)\nparams = []\n"
REBOUND = "params = params + list(model.parameters())\nopt_{i} = torch.optim.AdamW(params)\n"
READ_AGAIN = "out_{i} = model(torch.ones(2, 2))\nloss_{i} = out_{i}.sum()\n"

# Issue 38: steps through helpers (an object whose `__call__` runs the backward, a
# NativeScaler), micro-steps in a function called by the loop that steps, an optimizer
# returned with its model and passed on with a star, loaders returned as a pair; a
# step whose scaler or step function is passed in as an argument (each copy also calls
# the first copy's `epoch_0` with its own scaler: one function, a call per copy).
HELPER_HEADER = (
    "import torch\nimport torch_xla\nfrom timm.utils import NativeScaler\n"
    "from torch.utils.data import DataLoader\ndevice = torch_xla.device()\n"
)
HELPER = """

class Stepper{i}:
    def __init__(self, opt):
        self.opt = opt

    def __call__(self, loss):
        loss.backward()
        self.opt.step()


def build_{i}(lr):
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    return model, opt


class Runner{i}:
    def __init__(self, model, opt):
        self.model = model.to(device)
        self.opt = opt

    def forward_backward(self, batch):
        for micro in batch.split(2):
            self.model(micro).sum().backward()

    def run(self, batches):
        step = 0
        while step < 10:
            self.forward_backward(next(batches))
            self.opt.step()
            step += 1


def update_{i}(loss, opt):
    loss.backward()
    opt.step()


def epoch_{i}(model, loader, opt, loss_scaler, step_fn=update_{i}):
    for x, y in loader:
        loss_scaler(model(x.to(device)).sum())
        step_fn(model(y.to(device)).sum(), opt)
        print(y.sum().item())


def loaders_{i}():
    return DataLoader(ds, batch_size=8, shuffle=True), DataLoader(ds, batch_size=8)


def train_{i}(model, loader, opt):
    stepper = Stepper{i}(opt)
    scaler = NativeScaler()
    for x, y in loader:
        stepper(model(x.to(device)).sum())
        scaler(model(y.to(device)).sum(), opt)
        print(x.sum().item())
    train_loader, val_loader = loaders_{i}()
    Runner{i}(*build_{i}(0.1)).run(iter(train_loader))
    epoch_{i}(model, loader, opt, Stepper{i}(opt))
    epoch_0(model, loader, opt, Stepper{i}(opt))
"""

# name: (header, block, tail, copies of the block per copy asked for)
SHAPES = {
    "step functions": (STEP_HEADER, STEP_FUNCTION, "", 1),
    "trainers": (TRAINER_HEADER, TRAINER, TRAINER_TAIL, 1),
    ".cuda() lines": ("import torch\n", CUDA_LINE, "", 5),
    "rebound names": (REBOUND_HEADER, REBOUND, "", 2),
    "reads of one name": (REBOUND_HEADER, READ_AGAIN, "", 2),
    "helper and star flows": (HELPER_HEADER, HELPER, "", 1),
}
# What `fix` is timed on. The comment and blank lines sit between two fixable lines,
# one of which the fix makes too long for the line length (a call to split).
LONG_CALL = "loader = DataLoader(torch.ones(2).cuda(), batch_size=8, shuffle=True, num_workers=2)\n"
FIX_SHAPES = {
    "fixable blocks": (FIXABLE_HEADER, FIXABLE_BLOCK, "", 0.5),
    "fixable lines": ("import torch\n", CUDA_LINE, "", 5),
    "identical comment lines": ("import torch\n" + LONG_CALL, "# the same comment\n", LONG_CALL, 10),
    "blank lines": ("import torch\n" + LONG_CALL, "\n", LONG_CALL, 10),
    "large file": (TRAINER_HEADER, TRAINER, TRAINER_TAIL, 1.2),
}


def generated(shape: str, copies: int, shapes: dict = SHAPES) -> str:
    header, block, tail, scale = shapes[shape]
    return header + "".join(block.format(i=i) for i in range(round(copies * scale))) + tail


def best_of(run: Callable[[], int], repeat: int) -> tuple[float, int]:
    """Best wall time of ``repeat`` runs, and what the run counted."""
    best, count = float("inf"), 0
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        count = run()
        best = min(best, time.perf_counter() - start)
    return best, count


def check_run(source: str) -> Callable[[], int]:
    return lambda: len(lint_source(source, "generated.py", Settings()))


def fix_run(source: str) -> Callable[[], int]:
    # Outside the repository, whose pyproject.toml sets another line length: 88.
    path = str(Path(tempfile.gettempdir()) / "generated.py")

    def run() -> int:
        result = fix_source(source, path, Settings(), unsafe=True)
        assert result.error is None, result.error
        return len(result.applied)

    return run


#: What ``server_runs`` times, in its order.
SERVER_REQUESTS = ("diagnostics", "code actions at a line (fix-all resolved later)", "resolve fix-all")


def server_runs(source: str) -> tuple[Callable[[], int], Callable[[], int], Callable[[], int]]:
    """The language server's work on an open document, as it does it on each change:
    its diagnostics; the code actions at the cursor (a line with a finding in the middle) for a client
    that resolves them (VS Code), from the lint of that version (the server keeps it):
    each quick fix there with its edit, fix-all without; and the resolve of fix-all,
    which fixes the whole file when the client applies it (on save, say), not while the
    user types."""
    from lsprotocol import types

    from xlalint import server_lint
    from xlalint.engine.collector import collect_less_often

    collect_less_often()  # the collector's thresholds of the server's lint process (`server_lint.serve`)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as file:
        file.write(source)
    uri = Path(file.name).as_uri()
    lines = source.splitlines()
    middle = next(n for n in range(len(lines) // 2, len(lines)) if ".cuda(" in lines[n])  # a quick fix there
    cursor = types.Range(types.Position(middle, 0), types.Position(middle, len(lines[middle])))  # the line
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=cursor,
        context=types.CodeActionContext(diagnostics=[]),
    )
    linted = server_lint.analyze_document(uri, source)[0]
    fix_all = types.CodeAction("fix all", kind=server_lint.FIX_ALL, data={"uri": uri, "fix": "all"})

    def diagnostics() -> int:
        return len(server_lint.analyze_document(uri, source)[0].diagnostics)

    def actions() -> int:
        near = linted.near(cursor)  # what the server sends its lint process
        found = server_lint.document_code_actions(uri, source, "python", params, True, near, True)[0]
        return len([a for a in found if a.edit is not None or a.kind == server_lint.FIX_ALL])

    def resolve() -> int:
        resolved = server_lint.resolve_code_action(uri, source, fix_all, True, linted)[0]
        return len(resolved.edit.changes[uri]) if resolved.edit is not None else 0

    return diagnostics, actions, resolve


def command_run(args: list[str]) -> Callable[[], int]:
    """The command as `xlalint` runs it, in this process (no interpreter start to time)."""
    runner = CliRunner()

    def run() -> int:
        result = runner.invoke(app, args)
        assert result.exit_code in (0, 1), (result.exit_code, result.output[-2000:])
        return len(result.output)

    return run


def scaling(label: str, runs: dict[int, tuple[str, Callable[[], int]]], repeat: int, unit: str) -> float:
    """Prints a row per size; returns the large size's time over the small's."""
    seconds = {}
    for copies, (source, run) in runs.items():
        seconds[copies], count = best_of(run, repeat)
        print(
            f"| {label} | {copies} | {len(source) // 1024} | {count} {unit} | {seconds[copies]:.2f} "
            f"| {1000 * seconds[copies] / copies:.1f} |"
        )
    small, large = min(seconds), max(seconds)
    return seconds[large] / seconds[small]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=800)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", default="check,formats,fix,server", help="which parts to run")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    collect_less_often()  # as the command line does
    sizes = (args.small, args.large)
    # Imports, the rule registry, libcst, each format's reporter: not timed.
    lint_source(generated("trainers", 2), "warm.py", Settings())
    fix_source(generated("fixable blocks", 2, FIX_SHAPES), "warm.py", Settings(), unsafe=True)
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm.py"
        warm.write_text(generated("fixable blocks", 2, FIX_SHAPES))
        for fmt in FORMATS:
            command_run(["check", "--no-cache", "--show-fixes", "--output-format", fmt, str(warm)])()
    growth = args.large / args.small
    print("| what | copies | KB | counted | seconds | ms per copy |")
    print("|------|-------:|---:|--------:|--------:|------------:|")
    ratios: dict[str, float] = {}
    if "check" in parts:
        for shape in SHAPES:
            runs = {n: (source, check_run(source)) for n in sizes for source in [generated(shape, n)]}
            ratios[f"check, {shape}"] = scaling(f"check, {shape}", runs, args.repeat, "findings")
    if "formats" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            paths = {}
            for n in sizes:
                paths[n] = Path(tmp) / f"blocks_{n}.py"
                paths[n].write_text(generated("fixable blocks", n, FIX_SHAPES))
            for fmt, extra in [*((fmt, []) for fmt in FORMATS), ("full", ["--show-fixes"])]:
                label = f"check --output-format {fmt} {' '.join(extra)}".rstrip()
                runs = {
                    n: (
                        paths[n].read_text(),
                        command_run(
                            ["check", "--no-cache", "--exit-zero", "--output-format", fmt, *extra, str(paths[n])]
                        ),
                    )
                    for n in sizes
                }
                ratios[label] = scaling(label, runs, args.repeat, "chars")
    if "server" in parts:
        sources = {n: generated("fixable blocks", n, FIX_SHAPES) for n in sizes}
        every = {n: server_runs(sources[n]) for n in sizes}
        for index, label in enumerate(SERVER_REQUESTS):
            runs = {n: (sources[n], every[n][index]) for n in sizes}
            ratios[f"server: {label}"] = scaling(f"server: {label}", runs, 1 if index == 2 else args.repeat, "items")
    if "fix" in parts:
        for shape in FIX_SHAPES:
            runs = {n: (source, fix_run(source)) for n in sizes for source in [generated(shape, n, FIX_SHAPES)]}
            ratios[f"fix, {shape}"] = scaling(f"fix, {shape}", runs, 1, "fixes")
    print("\n| target | measured | met |")
    print("|---|---|---|")
    bar = 10 * growth / 8
    for label, ratio in ratios.items():
        print(f"| {label}: {growth:g}x the file in at most {bar:g}x the time | {ratio:.1f}x | {ratio <= bar} |")


if __name__ == "__main__":
    main()
