"""Why a sync site compiled more than one graph: the input shapes that changed.

The child's bootstrap records, per process, the shape of every tensor the user's code
moved to the XLA device (``tensor.to(device)`` called from the user's code, and the
batches a torch_xla device loader hands to the user's loop), by site: file, line,
column, and which transfer it was there within the step (``transfers-<pid>.json``).
A site whose shape changed between steps feeds graphs of new shapes to every sync
after it, and each new shape is a new compilation. This module reads those records,
names each site's tensor from the code that ran (``input_ids`` of
``input_ids.to(device)``, the loop variable of ``for input_ids, mask in loader``) and
maps its line to the user's file.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xlalint.harness import bootstrap
from xlalint.harness.paths import shown_path

if TYPE_CHECKING:
    from xlalint.harness.prepare import ScriptVersion

#: Findings that explain why input shapes change from step to step.
SHAPE_RULES = ("XLA101", "XLA301", "XLA302")
#: Shapes listed per input in the JSON report (the text report shows fewer).
MAX_JSON_SHAPES = 64
_MAX_NAME = 40


@dataclass(frozen=True)
class ShapeChange:
    """One input that reached the device with different shapes in different steps."""

    file: str  # as the report shows files (the user's script as given)
    line: int | None  # in the user's file; None for a line the fix wrote
    name: str  # e.g. "input_ids", or "batch['input_ids']"
    shapes: tuple[tuple[int, ...], ...]  # in order, consecutive repeats collapsed
    distinct: int  # how many different shapes
    #: The innermost loop the transfer ran in: (the file that ran, first line, last
    #: line), in that file's lines; None outside a loop. A validation loop's batches
    #: feed the syncs of that loop, not the training loop's (see ``feeds``).
    loop: tuple[str, int, int] | None = field(default=None, compare=False)

    def feeds(self, run_file: str, run_line: int) -> bool:
        """The transfer ran in the loop that holds this site (a line of a file that ran)."""
        return self.loop is not None and self.loop[0] == run_file and self.loop[1] <= run_line <= self.loop[2]

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "name": self.name,
            "shapes": [list(shape) for shape in self.shapes[:MAX_JSON_SHAPES]],
        }

    def describe(self, shown: int = 4) -> str:
        """``input_ids moved at train.py:84: (8, 23) -> (8, 19) -> ... (14 shapes)``"""
        steps = " -> ".join(_shape_text(shape) for shape in self.shapes[:shown])
        if len(self.shapes) > shown:
            steps += f" -> ... ({self.distinct} distinct shapes)"
        where = f"{self.file}:{self.line}" if self.line is not None else f"{self.file} (a line the fix wrote)"
        return f"{self.name} moved at {where}: {steps}"


def _shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def read_shape_changes(out_dir: Path, version: ScriptVersion, display_path: str) -> list[ShapeChange]:
    """The inputs whose shape changed during the run, from every process's record.

    The same site in several processes (one per replica) is reported once, from the
    process where it changed most.
    """
    best: dict[tuple, ShapeChange] = {}
    namer = _Namer(version)
    for path in sorted(out_dir.glob(f"{bootstrap.TRANSFERS_PREFIX}*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            sites = list(record["sites"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for site in sites:
            change = _change(site, namer, version, display_path)
            if change is None:
                continue
            key = (change.file, change.line, change.name)
            if key not in best or len(change.shapes) > len(best[key].shapes):
                best[key] = change
    return sorted(best.values(), key=lambda c: (c.file, c.line or 0, c.name))


def _change(site: dict, namer: _Namer, version: ScriptVersion, display_path: str) -> ShapeChange | None:
    try:
        runs = [(tuple(int(n) for n in shape), int(times)) for shape, times in site["runs"]]
        file, line = str(site["file"]), int(site["line"])
        col = site.get("col")
        col = int(col) if col is not None else None
        kind, slot, path = str(site["kind"]), int(site.get("slot", 0)), list(site.get("path", []))
    except (KeyError, TypeError, ValueError):
        return None
    shapes = []
    for shape, _times in runs:
        if not shapes or shapes[-1] != shape:
            shapes.append(shape)
    if len(shapes) < 2:
        return None
    name = namer.name(file, line, col, kind, slot, path)
    local = version.file_at(file)
    if local is not None:
        shown_file = display_path if local is version else local.display_path
        shown_line = None if local.is_inserted_line(line) else local.user_line(line)
    else:
        shown_file, shown_line = shown_path(file), line
    return ShapeChange(shown_file, shown_line, name, tuple(shapes), len(set(shapes)), namer.loop(file, line))


class _Namer:
    """Names a transfer from the source of the file it happened in."""

    def __init__(self, version: ScriptVersion) -> None:
        self._trees: dict[str, ast.Module | None] = {}
        self._loops: dict[str, list[tuple[int, int]]] = {}
        self._version = version

    def _tree(self, file: str) -> ast.Module | None:
        if file not in self._trees:
            try:
                local = self._version.file_at(file)
                source = local.source if local is not None else Path(file).read_text(encoding="utf-8")
                self._trees[file] = ast.parse(source)
            except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
                self._trees[file] = None
        return self._trees[file]

    def loop(self, file: str, line: int) -> tuple[str, int, int] | None:
        """The innermost ``for``/``while`` of ``file`` whose lines hold ``line``."""
        if file not in self._loops:
            tree = self._tree(file)
            nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))] if tree else []
            self._loops[file] = sorted((n.lineno, n.end_lineno or n.lineno) for n in nodes)
        inside = [(start, end) for start, end in self._loops[file] if start <= line <= end]
        if not inside:
            return None
        start, end = max(inside)  # the innermost: the last to start
        return (file, start, end)

    def name(self, file: str, line: int, col: int | None, kind: str, slot: int, path: list) -> str:
        tree = self._tree(file)
        if kind == "loader":
            return _loader_name(tree, line, path)
        if kind == "library":
            name = "tensor via a library call"
        else:
            name = (_to_receiver(tree, line, col) if tree else None) or "tensor"
        # The k-th transfer at one site within a step (a loop over a batch's tensors).
        return f"{name} (#{slot + 1} at this line)" if slot else name


def _to_receiver(tree: ast.Module, line: int, col: int | None) -> str | None:
    """``input_ids`` for the call ``input_ids.to(device)`` at ``line``/``col``."""
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "to"
        and node.lineno == line
    ]
    if col is not None:
        calls = [node for node in calls if node.col_offset == col] or calls
    if len(calls) != 1:
        return None
    return _short(ast.unparse(calls[0].func.value))


def _loader_name(tree: ast.Module | None, line: int, path: list) -> str:
    """The loop variable that receives a batch element: ``for ids, mask in loader``."""
    target = None
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, (ast.For, ast.AsyncFor)) and node.lineno == line:
            target = node.target
            break
    rest = list(path)
    while rest and isinstance(target, (ast.Tuple, ast.List)) and isinstance(rest[0], int):
        index = rest.pop(0)
        if index >= len(target.elts) or isinstance(target.elts[index], ast.Starred):
            target = None
            rest.insert(0, index)
            break
        target = target.elts[index]
    base = _short(ast.unparse(target)) if isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)) else "batch"
    if base == "batch" and target is None and rest and isinstance(rest[0], str) and len(rest) == 1:
        return rest[0]  # a dict batch: name it by its key
    return base + "".join(f"[{part!r}]" for part in rest)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_NAME else text[: _MAX_NAME - 3] + "..."


def explaining_findings(version: ScriptVersion) -> list[tuple[str, int | str | None]]:
    """(code, where) of the findings that explain shape changes: the line in the
    user's script, ``file:line`` in a local module, None on a line the fix wrote."""
    found: list[tuple[str, int | str | None]] = []
    for file in version.files():
        in_file = set()
        for finding in file.findings:
            if finding.code in SHAPE_RULES:
                line = finding.span.line
                in_file.add((finding.code, None if file.is_inserted_line(line) else file.user_line(line)))
        for code, line in sorted(in_file, key=lambda item: (item[1] or 0, item[0])):
            found.append((code, f"{file.display_path}:{line}" if file is not version and line else line))
    return found
