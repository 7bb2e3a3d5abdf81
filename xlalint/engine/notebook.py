"""Jupyter notebooks (``.ipynb``), checked and fixed as ruff does it.

The code cells are joined, in order, into one module (a notebook runs top to bottom,
so an import in cell 1 is seen in cell 5). Each cell starts with a marker comment
line, so the module can be cut back into cells after a fix. IPython syntax is not
Python: a line magic or shell line (``%matplotlib inline``, ``!pip install x``,
``files = !ls``, ``obj?``, ``/f x``), and a one-line cell IPython runs as a magic without
its ``%`` (automagic: ``pip install x``, ``cd /content``), stands in the module as a
marker comment (``pass`` and the comment in an indented block) and is put back
unchanged; a cell magic that runs Python (``%%time``) has its first line treated the
same way; a cell under any other cell magic (``%%bash``, ``%%writefile``) is not Python
and is left out. These are the lines IPython's input transformers turn into
``get_ipython().run_line_magic(...)``/``.system(...)`` calls (automagic is its prefilter,
which it applies to a cell of one line only): what stays is a syntax error in IPython
too, and is reported as one (XLA000) in its cell. IPython compiles each cell by itself:
a cell that does not parse is left out of the module (and left as it is by a fix), and
the other cells are analysed.

The file is plain JSON (nbformat's schema is not needed to read or write it): a fix
rewrites only the ``source`` of the code cells it changes, in place in the JSON text,
and every other character stays as it was (``notebook_json``): outputs, metadata, cell
ids, numbers and escapes, layout.

Findings are located in their cell (``cell N``, line and column within it). Formats
that must point into the file itself (SARIF) also get the position in the file's JSON
text: the line of the ``source`` string that holds the code and the column in it,
escapes counted (:meth:`CellText.file_region`).
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import re
import tokenize
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from xlalint.engine import source as sourcefile
from xlalint.engine.file_report import FileReport, internal_error
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import error_finding, lint_source
from xlalint.engine.noqa import add_noqa_until_clean
from xlalint.engine.notebook_json import (
    NotebookError,
    SourceString,
    file_position,
    replace_sources,
    source_strings,
)
from xlalint.model import Finding, Span, split_lines

# A cell magic whose body is Python: the body is checked; any other cell magic's is not.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "mprun"})
CELL_MARKER = "# xlalint-notebook-cell: {}"
_CELL_MARKER = re.compile(r"^# xlalint-notebook-cell: (\d+)$")
# A comment at the top level (so that imports a fix adds go after the cell's `!pip install`),
# `pass` in a block (where a comment alone would leave the block empty).
MAGIC_COMMENT = "# xlalint-notebook-magic"
# An IPython line that installs (`!pip install ...`, `%pip`, `!python env-setup.py`): setup
# code, which the imports a fix adds go below (fixers/imports.py).
SETUP_MAGIC_COMMENT = "# xlalint-notebook-setup"
_MAGIC_PLACEHOLDER = re.compile(r"^([ \t]*)(?:pass  )?# xlalint-notebook-(?:magic|setup)$")
_INSTALLS = re.compile(r"\b(?:pip3?|conda|mamba|apt(?:-get)?|install)\b|setup\.py")
# `files = !ls`, `t = %timeit -o f()`: IPython's assignment from a magic or shell line.
_MAGIC_ASSIGNMENT = re.compile(r"^[\w.\[\], \t]+=[ \t]*[%!]")
# IPython's escapes at the start of a line (``inputtransformer2.ESCAPE_SINGLES``): shell,
# help, magic, and the autoquote/autoparen calls ``,f a b``, ``;f a b``, ``/f a b``.
_ESCAPES = ("%", "!", "?", ",", ";", "/")
# IPython's line magics (and the shell aliases it defines as magics), which automagic
# runs without their `%`: `%lsmagic` of IPython 8.
LINE_MAGICS = frozenset(
    {
        "alias",
        "alias_magic",
        "autoawait",
        "autocall",
        "automagic",
        "autosave",
        "bookmark",
        "cat",
        "cd",
        "clear",
        "colors",
        "conda",
        "config",
        "connect_info",
        "cp",
        "debug",
        "dhist",
        "dirs",
        "doctest_mode",
        "ed",
        "edit",
        "env",
        "gui",
        "hist",
        "history",
        "killbgscripts",
        "ldir",
        "less",
        "lf",
        "lk",
        "ll",
        "load",
        "load_ext",
        "loadpy",
        "logoff",
        "logon",
        "logstart",
        "logstate",
        "logstop",
        "ls",
        "lsmagic",
        "lx",
        "macro",
        "magic",
        "mamba",
        "man",
        "matplotlib",
        "micromamba",
        "mkdir",
        "more",
        "mv",
        "notebook",
        "page",
        "pastebin",
        "pdb",
        "pdef",
        "pdoc",
        "pfile",
        "pinfo",
        "pinfo2",
        "pip",
        "popd",
        "pprint",
        "precision",
        "prun",
        "psearch",
        "psource",
        "pushd",
        "pwd",
        "pycat",
        "pylab",
        "qtconsole",
        "quickref",
        "recall",
        "rehashx",
        "reload_ext",
        "rep",
        "rerun",
        "reset",
        "reset_selective",
        "rm",
        "rmdir",
        "run",
        "save",
        "sc",
        "set_env",
        "store",
        "sx",
        "system",
        "tb",
        "time",
        "timeit",
        "unalias",
        "unload_ext",
        "uv",
        "who",
        "who_ls",
        "whos",
        "xdel",
        "xmode",
    }
)
_AUTOMAGIC = re.compile(r"^[ \t]*([A-Za-z_]\w*)(?:[ \t]+(.*))?$")


@dataclass(frozen=True)
class CellSource:
    """One code cell as it stands in the module."""

    number: int  # 1-based, counting every cell of the notebook (markdown too)
    text: str  # the cell's source as the user wrote it
    python: str  # the same with IPython lines replaced by placeholders
    magics: tuple[str, ...]  # the IPython lines the placeholders stand for, in order


class CellText(str):
    """The module made of a notebook's code cells, knowing which line is in which cell."""

    cells: tuple[CellSource, ...]
    # (first module line of the cell's code, cell number, number of lines), in order
    ranges: tuple[tuple[int, int, int], ...]

    def __new__(
        cls,
        cells: tuple[CellSource, ...],
        notebook_text: str | None = None,
        strings: dict[int, tuple[SourceString, ...]] | None = None,
        left_out: tuple[CellSource, ...] = (),
    ) -> CellText:
        parts, ranges, line = [], [], 1
        for cell in cells:
            body = cell.python if cell.python.endswith("\n") or not cell.python else cell.python + "\n"
            parts.append(CELL_MARKER.format(cell.number) + "\n" + body)
            count = len(split_lines(body))
            ranges.append((line + 1, cell.number, count))
            line += 1 + count
        self = super().__new__(cls, "".join(parts))
        self.cells, self.ranges = cells, tuple(ranges)
        # Code cells left out of the module (they do not parse): located for their errors.
        self.left_out = left_out
        # The notebook's JSON text, read for file positions only when a format asks.
        self.notebook_text, self._strings = notebook_text, strings
        return self

    def __reduce__(self):
        # Reports cross process boundaries (the process pool): rebuild from the cells and
        # the positions of their sources in the file, not from the whole JSON (outputs).
        return (
            CellText,
            (
                self.cells,
                None,
                self.source_strings() if self.notebook_text is not None else self._strings,
                self.left_out,
            ),
        )

    def source_strings(self) -> dict[int, tuple[SourceString, ...]]:
        """Cell number -> where its ``source`` strings are in the notebook's JSON text."""
        if self._strings is None:
            self._strings = source_strings(self.notebook_text) if self.notebook_text is not None else {}
        return self._strings

    def file_region(self, finding: Finding) -> tuple[int, int, int, int] | None:
        """Where a finding located in its cell (:meth:`to_cell`) is in the notebook's
        JSON text: (line, column, end line, end column), 1-based, the end exclusive.
        None when the text is not known."""
        strings = self.source_strings().get(finding.cell) if finding.cell is not None else None
        cell = next((c for c in (*self.cells, *self.left_out) if c.number == finding.cell), None)
        if not strings or cell is None:
            return None
        s = finding.span
        start = _offset(cell.text, s.line, s.col)
        end = max(_offset(cell.text, s.end_line, s.end_col), start)
        return (*file_position(strings, start, after=False), *file_position(strings, end, after=end > start))

    def locate(self, line: int) -> tuple[int, int]:
        """Module line -> (cell number, line within the cell); the marker line counts as the
        cell's line 1."""
        for first, number, count in reversed(self.ranges):
            if line >= first - 1:
                return number, max(1, min(line - first + 1, max(count, 1)))
        return (self.ranges[0][1], 1) if self.ranges else (1, line)

    def to_cell(self, finding: Finding) -> Finding:
        """A finding on the module, with its location in its cell."""
        s = finding.span
        cell, line = self.locate(s.line)
        end_cell, end_line = self.locate(s.end_line)
        end_col = s.end_col
        if end_cell != cell:  # cannot happen for code in one cell; keep the range in it
            end_line, end_col = line, s.col
        noqa_row = self.locate(finding.noqa_row)[1] if finding.noqa_row else None
        noqa_lines = tuple(self.locate(n)[1] for n in finding.noqa_lines)
        return replace(
            finding, span=Span(line, s.col, end_line, end_col), noqa_row=noqa_row, noqa_lines=noqa_lines, cell=cell
        )

    def cell_texts(self) -> dict[int, str]:
        return {cell.number: cell.text for cell in self.cells}


class Notebook:
    def __init__(self, text: str):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"notebook is not valid JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:
            raise NotebookError("notebook is not valid JSON: nested too deeply") from None
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise NotebookError("is not a Jupyter notebook (no `cells` list at the top level)")
        self.data, self.text = data, text
        metadata = data.get("metadata")
        info = metadata.get("language_info") if isinstance(metadata, dict) else None
        self.language = str(info.get("name", "python") if isinstance(info, dict) else "python").lower()
        cells = tuple(self._code_cells())
        #: XLA000 for each code cell that is not Python even to IPython (``cd /content`` on
        #: one line of several), located in its cell; such a cell is left out of the module.
        self.cell_errors: list[Finding] = []
        kept = self._parsing(cells)
        self.module = CellText(kept, text, left_out=tuple(c for c in cells if c not in kept))

    def _parsing(self, cells: tuple[CellSource, ...]) -> tuple[CellSource, ...]:
        """The cells that parse: IPython compiles each cell by itself, so one that does
        not parse is an error of its own and the others still run. Each cell is parsed
        alone only when the joined module does not parse."""
        if _parses(str(CellText(cells))):
            return cells
        kept = []
        for cell in cells:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SyntaxWarning)
                    ast.parse(cell.python)
            except SyntaxError as exc:
                line, col = exc.lineno or 1, max((exc.offset or 1) - 1, 0)
                error = error_finding("", f"SyntaxError: {exc.msg}", line, col)
                self.cell_errors.append(replace(error, cell=cell.number))
                continue
            except (ValueError, RecursionError, MemoryError):
                pass  # the module's parse reports it
            kept.append(cell)
        return tuple(kept)

    def _code_cells(self):
        for index, cell in enumerate(self.data["cells"]):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            if isinstance(source, list):
                if not all(isinstance(part, str) for part in source):
                    raise NotebookError(f"cell {index + 1}: `source` is not text")
                source = "".join(source)
            elif not isinstance(source, str):
                raise NotebookError(f"cell {index + 1}: `source` is not text")
            code = code_cell(index + 1, source)
            if code is not None:
                yield code

    @property
    def is_python(self) -> bool:
        return self.language in ("python", "python3", "ipython", "ipython3")

    def render(self, fixed_module: str) -> tuple[str, CellText]:
        """The notebook's JSON with the code cells of ``fixed_module`` (only the sources of
        the cells it changes rewritten), and the fixed module as a :class:`CellText`.
        Raises NotebookError when the fix moved code across cells or the sources cannot
        be rewritten exactly (see ``notebook_json``)."""
        fixed_cells = split_module(fixed_module, self.module.cells)
        before = self.module.cell_texts()
        changed = {cell.number: cell.text for cell in fixed_cells if cell.text != before[cell.number]}
        text = replace_sources(self.text, changed)
        return text, CellText(tuple(fixed_cells), text, left_out=self.module.left_out)


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def code_cell(number: int, source: str) -> CellSource | None:
    """Code cell ``number`` as it stands in the module; None when it is not Python (a
    cell under ``%%bash``). The language server builds notebooks from these too."""
    python, magics = _to_python(source)
    return None if python is None else CellSource(number, source, python, magics)


def _offset(text: str, line: int, col: int) -> int:
    """The offset in ``text`` of a 1-based line and 0-based column (clamped to the line)."""
    lines = split_lines(text, keepends=True)
    if line > len(lines):
        return len(text)
    body = lines[line - 1].rstrip("\r\n")
    return sum(len(part) for part in lines[: line - 1]) + min(col, len(body))


def _to_python(source: str) -> tuple[str | None, tuple[str, ...]]:
    """The cell as Python (None if it is not Python) and the IPython lines replaced."""
    lines = split_lines(source, keepends=True)
    magics: list[str] = []
    out: list[str] = []
    start = 0
    if lines and lines[0].lstrip().startswith("%%"):
        name = lines[0].lstrip()[2:].split(None, 1)
        if not name or name[0] not in PYTHON_CELL_MAGICS:
            return None, ()
        magics.append(lines[0])
        out.append(_placeholder(lines[0], ""))
        start = 1
    automagic = _automagic_line(lines[start:])
    if automagic is not None:  # a cell magic runs its body as a cell: automagic applies there too
        line = start + automagic
        magics.append(lines[line])
        out += [*lines[start:line], _placeholder(lines[line], ""), *lines[line + 1 :]]
        return "".join(out), tuple(magics)
    pending: list[str] = []  # the lines of the logical line being read
    continued_magic = False
    for line in lines[start:]:
        if continued_magic or (not pending and _is_magic(line)):
            magics.append(line)
            out.append(_placeholder(line, "" if continued_magic else None))
            continued_magic = line.rstrip("\r\n").endswith("\\")
            continue
        out.append(line)
        pending.append(line)
        if not _continues(pending):
            pending = []
    return "".join(out), tuple(magics)


def _placeholder(line: str, indent: str | None) -> str:
    body = line.rstrip("\r\n")
    newline = line[len(body) :]
    if indent is None:
        indent = body[: len(body) - len(body.lstrip(" \t"))]
    marker = SETUP_MAGIC_COMMENT if body.lstrip().startswith(("!", "%")) and _INSTALLS.search(body) else MAGIC_COMMENT
    return indent + ("pass  " if indent else "") + marker + newline


def _is_magic(line: str) -> bool:
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return False
    return stripped.startswith(_ESCAPES) or stripped.endswith("?") or bool(_MAGIC_ASSIGNMENT.match(stripped))


def _automagic_line(lines: list[str]) -> int | None:
    """The index of the line of a cell IPython runs as a line magic without its ``%``
    (``pip install x``): after leading blank lines the cell is that one line (IPython's
    prefilter, which does automagic, runs on one-line cells only), its first word names
    a line magic, what follows is not an assignment (``cd = 1``), and the line is not
    Python as it stands (``ls`` alone, or ``cd /x``, parses: it stays Python; IPython
    also strips the indentation of an indented one, ``  cd /x``)."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or len("".join(lines[first:]).splitlines()) != 1:
        return None
    match = _AUTOMAGIC.match(lines[first].rstrip("\r\n"))
    if match is None or match.group(1) not in LINE_MAGICS or (match.group(2) or "")[:1] in ("=", ","):
        return None
    try:
        ast.parse(lines[first])
    except (SyntaxError, ValueError):
        return first
    return None


def _continues(pending: list[str]) -> bool:
    """Whether the logical line in ``pending`` goes on (open bracket or string, or ``\\``)."""
    text = "".join(pending)
    if text.rstrip("\r\n").endswith("\\"):
        return True
    try:
        for _ in tokenize.generate_tokens(io.StringIO(text).readline):
            pass
    except tokenize.TokenError:
        return True
    except (SyntaxError, ValueError):
        return False
    return False


def split_module(module: str, original: tuple[CellSource, ...]) -> list[CellSource]:
    """Cut a (fixed) module back into its cells and put the IPython lines back."""
    by_number = {cell.number: cell for cell in original}
    chunks: dict[int, list[str]] = {}
    order: list[int] = []
    current: list[str] = []
    preamble = current
    for line in split_lines(module, keepends=True):
        match = _CELL_MARKER.match(line.rstrip("\r\n"))
        if match:
            number = int(match.group(1))
            if number in chunks or number not in by_number:
                raise NotebookError("a fix moved code between cells; notebook left unchanged")
            current = chunks[number] = []
            order.append(number)
            continue
        current.append(line)
    if order != [cell.number for cell in original]:
        raise NotebookError("a fix moved code between cells; notebook left unchanged")
    if preamble and order:  # code a fix put above the first cell's marker belongs to the first cell
        chunks[order[0]][:0] = preamble
    cells = []
    for number in order:
        old = by_number[number]
        python = _ending_as(old.python, "".join(chunks[number]))
        text = _restore_magics(python, old.magics)
        cells.append(CellSource(number, text, python, old.magics))
    return cells


def _ending_as(old: str, new: str) -> str:
    """``new``, the code of a cell cut from the module, ending as ``old`` did: with the
    same line breaks after its last line, or none. The module ends every cell with a
    line break, and a fix may leave blank lines before the next cell's marker (an import
    added at the end of the first cell gets one below it): none of that is the cell's.
    A cell a fix emptied is empty."""
    body, old_body = new.rstrip("\r\n"), old.rstrip("\r\n")
    if not body and old_body:
        return ""
    return body + old[len(old_body) :]


def _restore_magics(python: str, magics: tuple[str, ...]) -> str:
    lines = split_lines(python, keepends=True)
    queue = list(magics)
    out = []
    for line in lines:
        if _MAGIC_PLACEHOLDER.match(line.rstrip("\r\n")):
            if not queue:
                raise NotebookError("a fix moved an IPython magic line; notebook left unchanged")
            magic = queue.pop(0)
            newline = line[len(line.rstrip("\r\n")) :]
            out.append(magic.rstrip("\r\n") + newline)
        else:
            out.append(line)
    if queue:
        raise NotebookError("a fix removed an IPython magic line; notebook left unchanged")
    return "".join(out)


def cell_diffs(path: str, before: CellText, after: CellText) -> list[str]:
    """Unified diffs of the cells a fix changed, named ``path:cell N``."""
    old = before.cell_texts()
    lines: list[str] = []
    for number, text in after.cell_texts().items():
        if text == old.get(number):
            continue
        a = old.get(number, "")
        lines += difflib.unified_diff(
            split_lines(_with_final_newline(a), keepends=True),
            split_lines(_with_final_newline(text), keepends=True),
            f"a/{path}:cell {number}" if not Path(path).is_absolute() else f"{path}:cell {number}",
            f"b/{path}:cell {number}" if not Path(path).is_absolute() else f"{path}:cell {number}",
        )
    return lines


def _with_final_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def process_notebook(job, original: sourcefile.SourceFile | None = None, stdin: bool = False):
    """Check, fix or ``--add-noqa`` one notebook (a ``runner.Job``) into a :class:`FileReport`
    whose findings are located in their cells and whose sources are :class:`CellText`."""
    try:
        if original is None:
            original = sourcefile.read(Path(job.path))
        notebook = Notebook(original.text)
    except sourcefile.SourceError as exc:
        return FileReport(job.path, [error_finding(job.path, str(exc), exc.line, exc.col)])
    except NotebookError as exc:
        return FileReport(job.path, [error_finding(job.path, str(exc))])
    if stdin and (job.fix or job.add_noqa):
        message = "a notebook is fixed in place, not through stdin: name the file instead"
        return FileReport(job.path, [error_finding(job.path, message)])
    try:
        return _process(job, original, notebook, write=job.write and not stdin)
    except Exception as exc:  # a bug in a rule costs one file, not the run
        return internal_error(job.path, exc)


def _process(job, original: sourcefile.SourceFile, notebook: Notebook, *, write: bool):
    module = notebook.module
    if not notebook.is_python:  # an R or Julia notebook: nothing of ours to check
        return FileReport(job.path, [], source=module)
    errors = [replace(f, path=job.path) for f in notebook.cell_errors]
    if not job.fix and not job.add_noqa:
        findings = lint_source(module, job.path, job.settings)
        return FileReport(job.path, errors + [module.to_cell(f) for f in findings], source=module)

    checked = None
    if job.add_noqa:
        new_module, findings, count = add_noqa_until_clean(
            module, lambda text: lint_source(text, job.path, job.settings)
        )
        remaining, applied, error = findings, [], None
    else:
        result = fix_source(module, job.path, job.settings, unsafe=job.unsafe)
        new_module, count = result.source, 0
        remaining, applied, error = result.remaining, result.applied, result.error
        checked = result.checked
    fixed = module
    if new_module != module:
        try:
            text, fixed = notebook.render(new_module)
        except NotebookError as exc:
            error, fixed, count = str(exc), module, 0
            remaining, applied = lint_source(module, job.path, job.settings), []
        else:
            if write:
                try:
                    sourcefile.write_atomic(Path(job.path), original, text)
                except (sourcefile.SourceError, OSError) as exc:
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                    error, fixed, count = f"not written: {reason}", module, 0
                    remaining, applied = lint_source(module, job.path, job.settings), []
    return FileReport(
        job.path,
        errors
        + ([fixed.to_cell(f) for f in remaining] if not job.add_noqa else [module.to_cell(f) for f in remaining]),
        [module.to_cell(f) for f in applied],
        source=module,
        fixed_source=fixed,
        error=error,
        noqa_added=count,
        checked=checked,
    )
