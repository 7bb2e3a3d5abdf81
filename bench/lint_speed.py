"""How fast the check path is, as ratios against baselines measured in the same run.

The corpus: the first --min-files files that import torch under the given folders
(default: the installed transformers package; a small corpus is repeated). Measured:
- baseline: ``ast.parse`` + a full ``ast.walk`` of each file on one core (the floor
  for any ast-based linter);
- xlalint ``lint_source``, every rule, one core (target: at most 1.3x the baseline);
- xlalint's runner on every core (the process pool a many-file ``check`` uses);
- ``xlalint check`` cold and warm (cached) as a command (targets: cold at most 1.2x the
  baseline, warm at most 0.2 s; issue 39);
- a one-file ``xlalint check`` as pre-commit runs it, median wall of --runs runs,
  next to a bare ``python -c pass`` (target: at most 0.12 s);
- libcst ``parse_module`` (what the check path avoids);
- TorchFix and Fixit on the same files when installed in ``bench/.venv-others``
  (``--install-others`` makes it: TorchFix pins an older libcst than ours);
- a project of --project-files modules that import each other (each builds a model
  class of another, which ties two weights: XLA502 asks the project index about it):
  ``xlalint check`` of the whole tree, cold, with ``follow-imports`` (the default)
  against ``--no-follow-imports`` (target: at most 1.1x: following adds nothing to
  check when every module is named already), and of its entry script alone, which
  follows its imports (at most ``follow.MAX_DEPTH`` away).

    python bench/lint_speed.py [FOLDER ...] [--min-files 300] [--repeat 3] [--runs 9]
                               [--project-files 300] [--only corpus,project]
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from commands import COMMAND_ENV

from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source
from xlalint.engine.runner import Job, process_all

HERE = Path(__file__).parent
OTHERS = HERE / ".venv-others"


def default_folders() -> list[Path]:
    try:
        import importlib.util

        spec = importlib.util.find_spec("transformers")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        return [Path(spec.origin).parent]
    return [HERE.parent / "tests" / "fixtures", HERE.parent / "examples"]


def corpus(folders: list[Path], min_files: int) -> list[tuple[str, str]]:
    files: list[tuple[str, str]] = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "import torch" in text:
                files.append((str(path), text))
            if len(files) >= min_files:
                return files
    if not files:
        raise SystemExit("no torch files found")
    out = []
    while len(out) < min_files:
        out.extend(files)
    return out[:min_files]


def best_alternating(repeat: int, *fns) -> list[float]:
    """The best time of each of ``fns``, run in turn ``repeat`` times: the machine's
    slow spells fall on all of them alike."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [min(t) for t in times]


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def wall(cmd: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=COMMAND_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: findings
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        print(f"warning: {cmd[0]} exited {done.returncode}: {' '.join(tail)}", file=sys.stderr)
    return seconds


def install_others() -> None:
    if not (OTHERS / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(OTHERS)], check=True)
    subprocess.run([str(OTHERS / "bin" / "pip"), "install", "-q", "torchfix", "fixit"], check=True)


def others(folder: Path) -> list[tuple[str, list[str]]]:
    """The other linters' commands over ``folder``, for those installed."""
    tools = []
    torchfix = OTHERS / "bin" / "torchfix"
    if torchfix.exists():
        tools.append(("TorchFix (torchfix)", [str(torchfix), "--select", "ALL", str(folder)]))
    fixit = OTHERS / "bin" / "fixit"
    if fixit.exists():
        tools.append(("Fixit (fixit lint)", [str(fixit), "lint", str(folder)]))
    return tools


# One module of the generated project: it imports the next module and the class of a
# module further on, builds that class (XLA502 asks where it ties its weights) in a
# training loop, and defines a tied class of its own.
PROJECT_MODULE = """\
import torch
import torch_xla
from torch import nn

import m{next}
from m{other} import Net{other}


class Net{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.embed(x))


def train_{i}(loader):
    model = Net{other}().to(torch_xla.device())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        opt.step()
        torch_xla.sync()
    return m{next}.train_{next}
"""


def write_project(folder: Path, count: int) -> Path:
    """``count`` modules ``m0.py``... importing each other (in a ring), a
    ``pyproject.toml`` (the project root) and ``main.py``, which imports ``m0``."""
    folder.mkdir()
    (folder / "pyproject.toml").write_text("")
    for i in range(count):
        text = PROJECT_MODULE.format(i=i, next=(i + 1) % count, other=(i * 7 + 3) % count)
        (folder / f"m{i}.py").write_text(text, encoding="utf-8")
    main = folder / "main.py"
    main.write_text("import torch_xla\n\nimport m0\n\nm0.train_0([])\n", encoding="utf-8")
    return main


def project_rows(count: int, repeat: int) -> tuple[list[tuple[str, float]], float, float]:
    """The project's rows: its baseline (ast parse + walk of its files, 1 core) and the
    commands; and the cold check with and without following imports."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "project"
        main = write_project(folder, count)
        texts = [(str(p), p.read_text()) for p in sorted(folder.glob("*.py"))]

        def baseline() -> None:
            for name, text in texts:
                for _ in ast.walk(ast.parse(text, name)):
                    pass

        command = [sys.executable, "-m", "xlalint.cli", "check", "--exit-zero", "-q", "--output-format", "concise"]
        wall([*command, "--no-cache", str(main)], cwd=folder)  # writes the bytecode
        cache = folder / ".xlalint_cache"
        runs: dict[str, list[float]] = {"follow": [], "no follow": [], "script": []}
        base = best_of(1, baseline)
        for _ in range(repeat):
            # In turn: the machine's slow spells fall on all of them alike.
            for label, args in (("follow", []), ("no follow", ["--no-follow-imports"]), ("script", [])):
                shutil.rmtree(cache, ignore_errors=True)
                target = str(main) if label == "script" else str(folder)
                runs[label].append(wall([*command, *args, target], cwd=folder))
            base = min(base, best_of(1, baseline))
    follow, no_follow = min(runs["follow"]), min(runs["no follow"])
    rows = [
        (f"project of {count} importing modules: ast parse + walk, 1 core", base),
        ("  `xlalint check` of the tree, cold (follows imports)", follow),
        ("  `xlalint check --no-follow-imports` of the tree, cold", no_follow),
        ("  `xlalint check main.py`, cold (follows its imports)", min(runs["script"])),
    ]
    return rows, follow, no_follow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--min-files", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=9, help="runs of the one-file check (median)")
    parser.add_argument("--no-libcst", action="store_true")
    parser.add_argument("--install-others", action="store_true", help="install TorchFix and Fixit for the comparison")
    parser.add_argument("--project-files", type=int, default=300, help="modules of the generated project")
    parser.add_argument("--only", default="corpus,project", help="which parts to run")
    args = parser.parse_args()
    if args.install_others:
        install_others()
    parts = set(args.only.split(","))
    if "corpus" in parts:
        corpus_rows(args)
    if "project" in parts:
        rows, follow, no_follow = project_rows(args.project_files, args.repeat)
        print(f"\n| {'what':<62} | {'seconds':>8} | {'x baseline':>10} |")
        print(f"|{'-' * 64}|{'-' * 10}|{'-' * 12}|")
        for what, seconds in rows:
            print(f"| {what:<62} | {seconds:>8.3f} | {seconds / rows[0][1]:>10.2f} |")
        print("\n| target | measured | met |")
        print("|---|---|---|")
        ratio = follow / no_follow
        print(f"| check of the tree following imports at most 1.1x without | {ratio:.2f}x | {ratio <= 1.1} |")


def corpus_rows(args: argparse.Namespace) -> None:
    """The corpus's rows and targets (the first parts of the docstring)."""
    files = corpus(args.folders or default_folders(), args.min_files)
    lines = sum(text.count("\n") for _, text in files)
    settings = Settings()
    cores = os.cpu_count() or 1

    def baseline() -> None:
        for name, text in files:
            for _ in ast.walk(ast.parse(text, name)):
                pass

    def xlalint() -> None:
        for name, text in files:
            lint_source(text, name, settings)

    base_time, lint_time = best_alternating(args.repeat, baseline, xlalint)
    rows = [("ast parse + walk, 1 core (baseline)", base_time), ("xlalint lint_source, 1 core", lint_time)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "corpus"
        folder.mkdir()
        for i, (name, text) in enumerate(files):
            (folder / f"f{i:04d}_{Path(name).name}").write_text(text, encoding="utf-8")
        jobs = [Job(str(p), settings) for p in sorted(folder.glob("*.py"))]
        rows.append((f"xlalint runner, {cores} cores", best_of(args.repeat, lambda: process_all(jobs))))
        command = [sys.executable, "-m", "xlalint.cli", "check", "--exit-zero", "-q", "--output-format", "concise"]
        one = str(folder / sorted(os.listdir(folder))[0])
        wall([sys.executable, "-m", "xlalint.cli", "check", "--no-cache", "-q", one])  # writes the bytecode
        cache = Path(tmp) / ".xlalint_cache"
        colds, warms = [], []
        for _ in range(args.repeat):
            shutil.rmtree(cache, ignore_errors=True)
            colds.append(wall([*command, str(folder)], cwd=Path(tmp)))
            warms.append(wall([*command, str(folder)], cwd=Path(tmp)))
            base_time = min(base_time, best_of(1, baseline))  # in turn with the command, too
        shutil.rmtree(cache, ignore_errors=True)
        cold, warm = min(colds), min(warms)
        rows.append((f"`xlalint check` command, cold, {cores} cores", cold))
        rows.append(("`xlalint check` command, warm (cached)", warm))
        if not args.no_libcst:
            import libcst

            rows.append(("libcst parse_module, 1 core", best_of(1, lambda: [libcst.parse_module(t) for _, t in files])))
        other_rows = [(f"{what}, as installed", wall(cmd)) for what, cmd in others(folder)]
        rows += other_rows

        one_file = statistics.median(
            wall([sys.executable, "-m", "xlalint.cli", "check", "--no-cache", "-q", one]) for _ in range(args.runs)
        )
        bare = statistics.median(wall([sys.executable, "-c", "pass"]) for _ in range(args.runs))

    rows[0] = (rows[0][0], base_time)
    base = base_time
    print(f"{len(files)} files, {lines} lines, {cores} cores")
    print(f"| {'what':<44} | {'seconds':>8} | {'x baseline':>10} |")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 12}|")
    for what, seconds in rows:
        print(f"| {what:<44} | {seconds:>8.3f} | {seconds / base:>10.2f} |")
    print(f"\none-file `xlalint check` (median of {args.runs}): {one_file:.3f} s; bare `python -c pass`: {bare:.3f} s")
    for what, seconds in other_rows:
        print(f"{what}: {seconds / cold:.1f}x the time of xlalint's cold check of the same files")
    print("\n| target | measured | met |")
    print("|---|---|---|")
    print(f"| cold check at most 1.2x the baseline ({cores} cores) | {cold / base:.2f}x | {cold / base <= 1.2} |")
    print(f"| warm (cached) rerun at most 0.2 s | {warm:.3f} s | {warm <= 0.2} |")
    print(f"| one-file check at most 0.12 s (median) | {one_file:.3f} s | {one_file <= 0.12} |")


if __name__ == "__main__":
    main()
