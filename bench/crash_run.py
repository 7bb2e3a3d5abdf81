"""A crash run: check and fix (``--unsafe-fixes``, on copies) every Python file of
installed packages, and count what went wrong.

For each file: ``check`` it, then ``fix --unsafe-fixes`` a copy in a temp folder
through the same path the command line takes (``xlalint.engine.runner.process``),
then parse what was written and fix it again. Counted as failures:

- crashes: an internal error while checking or fixing (a bug in a rule or a fixer),
  or an exception that escapes the runner;
- unparseable: a written file that does not parse;
- non-idempotent: a second fix that changes the file again;
- not converged: fixes that did not settle within the fix loop's passes.

Files that are not Python 3 (syntax errors), too large or nested too deeply are
counted but are not failures: xlalint reports them and goes on.

    python bench/crash_run.py [FOLDER ...] [--sample N] [--seed S] [--jobs J] [--verbose]

With no folder: the installed torch, torch_xla and transformers packages. Prints the
counts, one line per failure, and exits 1 on any failure. On a terminal a progress bar
(on stderr) shows how far it is; piped, it prints nothing until the counts.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from xlalint.engine.config import Settings
from xlalint.engine.runner import Job, process

DEFAULT_PACKAGES = ("torch", "torch_xla", "transformers")
FAILURES = ("crash", "unparseable", "non_idempotent", "not_converged")


@dataclass
class Outcome:
    path: str
    kinds: list[str] = field(default_factory=list)  # "checked", "fixed", "crash", ...
    details: list[str] = field(default_factory=list)


def package_folders(names: tuple[str, ...] = DEFAULT_PACKAGES) -> list[Path]:
    folders = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"crash_run: package `{name}` is not installed")
        folders.append(Path(next(iter(spec.submodule_search_locations))))
    return folders


def corpus(folders: list[Path]) -> list[Path]:
    return sorted(p for folder in folders for p in folder.rglob("*.py") if p.is_file() and not p.is_symlink())


def _is_internal(message: str) -> bool:
    return message.startswith(("internal error", "cannot fix: internal"))


def run_one(path_name: str) -> Outcome:
    outcome = Outcome(path_name)
    settings = Settings()
    try:
        checked = process(Job(path_name, settings))
        errors = [f for f in checked.findings if f.code == "XLA000"]
        if any(_is_internal(f.message) for f in errors):
            outcome.kinds.append("crash")
            outcome.details += [f"check: {f.message}" for f in errors if _is_internal(f.message)]
            return outcome
        if errors:
            outcome.kinds.append("not_python")  # a syntax error, too large, undecodable...
            return outcome
        outcome.kinds.append("checked")
        if not any(f.fix is not None for f in checked.findings):
            return outcome  # the fix would only check it again
        with tempfile.TemporaryDirectory(prefix="xlalint-crash-") as folder:
            copy = Path(folder) / Path(path_name).name
            shutil.copyfile(path_name, copy)
            fixed = process(Job(str(copy), settings, fix=True, unsafe=True))
            if fixed.error:
                kind = "not_converged" if "did not converge" in fixed.error else "crash"
                if "does not parse" in fixed.error:
                    kind = "unparseable"
                if "nested too deeply" in fixed.error:
                    kind = "too_deep"
                outcome.kinds.append(kind)
                outcome.details.append(f"fix: {fixed.error}")
                return outcome
            if not fixed.changed:
                return outcome
            outcome.kinds.append("fixed")
            written = copy.read_bytes()
            try:
                ast.parse(written)
            except (SyntaxError, ValueError) as exc:
                outcome.kinds.append("unparseable")
                outcome.details.append(f"written file does not parse: {exc}")
                return outcome
            again = process(Job(str(copy), settings, fix=True, unsafe=True))
            if again.error or again.changed or copy.read_bytes() != written:
                outcome.kinds.append("non_idempotent")
                outcome.details.append(f"a second fix changed the file again ({again.error or 'changed'})")
    except Exception:  # the runner must never raise; if it does, that is a crash
        outcome.kinds.append("crash")
        outcome.details.append("exception: " + traceback.format_exc().strip().splitlines()[-1])
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", nargs="*", type=Path, help="folders to walk (default: torch, torch_xla, transformers)"
    )
    parser.add_argument("--sample", type=int, default=0, help="check only this many files, chosen at random")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--verbose", action="store_true", help="print every file as it is done")
    args = parser.parse_args(argv)

    files = corpus(args.folders or package_folders())
    if args.sample and args.sample < len(files):
        files = sorted(random.Random(args.seed).sample(files, args.sample))
    started = time.perf_counter()
    counts: Counter[str] = Counter()
    failures: list[Outcome] = []
    names = [str(p) for p in files]
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            outcomes = pool.map(run_one, names, chunksize=8)
            results = list(_progress(outcomes, args.verbose, len(names)))
    else:
        results = list(_progress(map(run_one, names), args.verbose, len(names)))
    for outcome in results:
        counts.update(outcome.kinds)
        if any(kind in FAILURES for kind in outcome.kinds):
            failures.append(outcome)
    elapsed = time.perf_counter() - started
    for outcome in failures:
        for detail in outcome.details or ["(no detail)"]:
            print(f"FAIL {outcome.path}: {detail}")
    print(
        f"files: {len(files)}  checked: {counts['checked']}  not python 3: {counts['not_python']}  "
        f"fixed: {counts['fixed']}  too deep to fix: {counts['too_deep']}  seconds: {elapsed:.0f}"
    )
    print("  ".join(f"{kind.replace('_', ' ')}: {counts[kind]}" for kind in FAILURES))
    return 1 if failures else 0


def _progress(outcomes, verbose: bool, total: int):
    """The outcomes as they come; each file on stderr with --verbose, else a progress bar
    when stderr is a terminal (the full run takes minutes), else nothing."""
    if verbose:
        for outcome in outcomes:
            print(f"{','.join(outcome.kinds) or '-'} {outcome.path}", file=sys.stderr, flush=True)
            yield outcome
        return
    if not sys.stderr.isatty():
        yield from outcomes
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("crash run"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("files", total=total)
        for outcome in outcomes:
            bar.advance(task)
            yield outcome


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
