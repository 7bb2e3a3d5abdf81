"""How fast the check path is, as ratios against baselines measured in the same process.

The corpus is every Python file under the given folders (default: tests/fixtures,
examples), repeated until there are at least --min-files files. Measured:
- baseline: ``ast.parse`` + a full ``ast.walk`` of each file (the floor for any
  ast-based linter);
- xlalint: ``lint_source`` with every rule (parse, semantic layer, one walk, rules);
- libcst: ``libcst.parse_module`` (what the check path avoids).
Printed as seconds and as ratios to the baseline: a rule that makes checking slow shows
up as a rising xlalint/ast ratio, whatever machine runs it.

    python bench/lint_speed.py [FOLDER ...] [--min-files 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ast
import time
from pathlib import Path

from xlalint.linter.config import Settings
from xlalint.linter.engine import lint_source


def corpus(folders: list[Path], min_files: int) -> list[tuple[str, str]]:
    files = [(str(p), p.read_text(encoding="utf-8")) for folder in folders for p in sorted(folder.rglob("*.py"))]
    files = [(name, text) for name, text in files if "torch" in text]
    if not files:
        raise SystemExit("no torch files found")
    out = []
    while len(out) < min_files:
        out.extend(files)
    return out


def best_of(repeat: int, fn) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[Path("tests/fixtures"), Path("examples")])
    parser.add_argument("--min-files", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-libcst", action="store_true")
    args = parser.parse_args()

    files = corpus(args.folders, args.min_files)
    lines = sum(text.count("\n") for _, text in files)
    settings = Settings()

    def baseline() -> None:
        for name, text in files:
            for _ in ast.walk(ast.parse(text, name)):
                pass

    def xlalint() -> None:
        for name, text in files:
            lint_source(text, name, settings)

    rows = [("ast parse + walk (baseline)", best_of(args.repeat, baseline))]
    rows.append(("xlalint lint_source, all rules", best_of(args.repeat, xlalint)))
    if not args.no_libcst:
        import libcst

        rows.append(("libcst parse_module", best_of(1, lambda: [libcst.parse_module(t) for _, t in files])))
    base = rows[0][1]
    print(f"{len(files)} files, {lines} lines")
    print(f"| {'what':<32} | {'seconds':>8} | {'x baseline':>10} |")
    print(f"|{'-' * 34}|{'-' * 10}|{'-' * 12}|")
    for what, seconds in rows:
        print(f"| {what:<32} | {seconds:>8.3f} | {seconds / base:>10.2f} |")


if __name__ == "__main__":
    main()
