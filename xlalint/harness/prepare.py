"""The versions of the script that get run: the user's files, fixed copies, a CUDA baseline.

A version is the script and its local modules (the files of the user's program it
imports, see ``local_modules``). Fixed copies are written to a temporary folder with
the layout of the script's folder; the user's files are only read. Each file of a
version carries the lint findings of its own source (causes are joined to findings by
the line in the code that actually ran) and a map from its lines back to the user's
file, so every reported ``file:line`` points into the user's files.
"""

from __future__ import annotations

import difflib
import functools
import os
import tokenize
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xlalint.model import Finding

# When a finding spans several lines (a multi-line call), a cause on any of them joins
# it; spans longer than this are whole blocks (a loop, a def) and join only their
# first line, or every cause inside a loop would take the loop's code.
_MAX_JOIN_SPAN_LINES = 10
# A new line in a rewritten block is the rewrite of an old line when it resembles it
# this much (difflib's ratio); it looks at most this many old lines ahead (linear time).
_REWRITTEN_RESEMBLANCE = 0.5
_PAIRING_WINDOW = 8
_MIN_KEPT_LENGTH = 8
# Where a version's folder keeps the fixed copies of the modules outside the script's
# folder (the project root's): apart from the script's layout, so that no name meets.
OUTSIDE_FOLDER = Path("_project")
_COMPARED_CHARS = 200  # of each line: a minified line costs no more than a long one


def _resemblance(old: str, new: str) -> float:
    """How much ``new`` looks like a rewrite of ``old`` (0..1): difflib's ratio, or the
    share of ``old`` kept in ``new`` (a call wrapped by the fix keeps all of it)."""
    old, new = old.strip()[:_COMPARED_CHARS], new.strip()[:_COMPARED_CHARS]
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    kept = sum(block.size for block in matcher.get_matching_blocks())
    # A short line is found in almost anything: only its ratio counts.
    share_kept = kept / len(old) if len(old) >= _MIN_KEPT_LENGTH else 0.0
    return max(matcher.ratio(), share_kept)


def read_source(path: Path) -> tuple[str, str]:
    """The script's text and encoding, decoded as Python would (coding cookie, BOM)."""
    with tokenize.open(path) as file:
        return file.read(), file.encoding


class LineMap:
    """Lines of a changed copy -> lines of the user's file (both 1-based).

    Unchanged lines map exactly. In a block of lines the fix rewrote, each new line is
    paired, in order, with the old line it most resembles (a rewritten statement maps
    to the user's statement it replaced); a new line like none of them, or beyond
    them, was inserted by the fix, as is every line of a pure insertion. Inserted lines
    map to the user's line just before them, and have no line of their own in the
    user's file (the report shows them as lines of the fixed copy after that line, not
    as their neighbour).
    """

    def __init__(self, original: str, changed: str) -> None:
        self._to_original: dict[int, int] = {}
        self._from_fix: set[int] = set()
        self._inserted: set[int] = set()
        old, new = original.splitlines(), changed.splitlines()
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for j in range(j1, j2):
                    self._to_original[j + 1] = i1 + (j - j1) + 1
            elif tag in ("replace", "insert"):
                self._map_rewritten(old, new, i1, i2, j1, j2)

    def _map_rewritten(self, old: list[str], new: list[str], i1: int, i2: int, j1: int, j2: int) -> None:
        """Pair the new lines j1..j2 with the old lines i1..i2 they rewrote, in order;
        the others are inserted after the last user line before them."""
        next_old = i1  # 0-based: old lines before it are paired or passed
        for j in range(j1, j2):
            self._from_fix.add(j + 1)
            window = range(next_old, min(i2, next_old + _PAIRING_WINDOW))
            scores = [(_resemblance(old[i], new[j]), -i) for i in window]
            best = max(scores, default=(0.0, 0))
            if best[0] >= _REWRITTEN_RESEMBLANCE:
                paired = -best[1]
                self._to_original[j + 1] = paired + 1
                next_old = paired + 1
            else:
                # After the last old line paired or passed; line 1 at the very top.
                self._to_original[j + 1] = max(next_old, 1)
                self._inserted.add(j + 1)

    def original_line(self, line: int) -> int:
        return self._to_original.get(line, line)

    def is_from_fix(self, line: int) -> bool:
        return line in self._from_fix

    def is_inserted(self, line: int) -> bool:
        return line in self._inserted


@dataclass(frozen=True)
class UserFile:
    """A file of the user's program, as read: the script or one of its local modules."""

    path: Path  # the user's file (only ever read)
    display_path: str  # how the report names it
    source: str
    encoding: str
    #: Its place under the script's folder, and so in a version's folder of copies.
    relative: Path


def read_user_file(path: Path, display_path: str, relative: Path) -> UserFile:
    source, encoding = read_source(path)
    return UserFile(path, display_path, source, encoding, relative)


def read_local_modules(script: Path, display_path: str, *, follow: bool = True) -> list[UserFile]:
    """The script's local modules, none when ``follow`` is off: those of its folder
    (see ``local_modules``) and those that following imports reaches as `check` and
    `fix` do (``engine/follow.py``: also the project root's and its ``src/``, which an
    editable install points at; never site-packages). A module of the script's folder
    is named next to the script as the user named it, and keeps its place under it in a
    version's folder; one outside it goes under ``OUTSIDE_FOLDER`` there, by its place
    under the project root. A module that cannot be read is left out (it fails at run
    time as it would without the harness)."""
    if not follow:
        return []
    from xlalint.analysis.project import project_root
    from xlalint.engine.api import settings_for
    from xlalint.engine.follow import program_modules
    from xlalint.harness.local_modules import find_local_modules, is_installed_code

    root = script.resolve().parent
    folder = os.path.dirname(display_path)
    found: dict[Path, tuple[Path, str]] = {}  # real path -> (its place in a version's folder, its name)
    for module in find_local_modules(script):
        relative = module.path.relative_to(root)
        found[module.path.resolve()] = (relative, os.path.normpath(os.path.join(folder, relative)))
    top = project_root(root / script.name, settings_for(script).root) or root
    # A script run from site-packages has no modules of its own to fix.
    followed = [] if is_installed_code(root) else program_modules(script, settings_for)
    for path in followed:
        real = path.resolve()
        if real in found or is_installed_code(real):
            continue
        if real.is_relative_to(root):
            relative = real.relative_to(root)
            found[real] = (relative, os.path.normpath(os.path.join(folder, relative)))
        else:
            below = real.relative_to(top) if real.is_relative_to(top) else Path(*real.parts[1:])
            found[real] = (OUTSIDE_FOLDER / below, str(path))
    files = []
    for real, (relative, shown) in sorted(found.items()):
        try:
            files.append(read_user_file(real, shown, relative))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
    return files


@dataclass(frozen=True)
class AppliedFix:
    """One fix applied to a user's file: its file, rule and line in the user's file
    (None: a line an earlier fix wrote), and what it does (its title)."""

    path: str  # as the report names the file
    code: str
    line: int | None
    title: str = field(default="", compare=False)

    def describe(self) -> str:
        """``utils.py:132 (XLA104 `is_available()`: ...)``"""
        where = f"{self.path}:{self.line}" if self.line is not None else f"{self.path} (a line a fix wrote)"
        return f"{where} ({self.code}{': ' + self.title if self.title else ''})"


def _fix_title(finding: Finding) -> str:
    return finding.fix.message if finding.fix is not None else finding.message


@dataclass
class SourceFile:
    """One file of the user's program as a version runs it: the user's own file, or a
    fixed copy whose lines map back to the user's."""

    run_path: Path  # the file whose code runs
    source: str
    findings: list[Finding]  # lint findings of `source`, positions in `source`
    line_map: LineMap | None = None  # None: `run_path` is the user's own file
    display_path: str = ""  # how the report names the user's file
    #: The user's file; its fixed copy (when `line_map` is set) runs in its place.
    user_path: Path | None = None
    applied: list[Finding] = field(default_factory=list)
    fix_error: str | None = None
    #: For each of ``applied``: its line in the user's file (None: a line a fix wrote).
    applied_lines: list[int | None] = field(default_factory=list)

    def applied_fixes(self) -> list[AppliedFix]:
        """The fixes applied to this file, each named as ``keep`` recognises it."""
        return [
            AppliedFix(self.display_path, finding.code, line, _fix_title(finding))
            for finding, line in zip(self.applied, self.applied_lines, strict=False)
        ]

    @property
    def changed(self) -> bool:
        """The fix changed this file: its fixed copy runs instead of the user's."""
        return self.line_map is not None

    def user_line(self, line: int) -> int:
        return self.line_map.original_line(line) if self.line_map else line

    def is_fixed_line(self, line: int) -> bool:
        return bool(self.line_map and self.line_map.is_from_fix(line))

    def is_inserted_line(self, line: int) -> bool:
        """The fix added this line: no line of the user's file corresponds to it."""
        return bool(self.line_map and self.line_map.is_inserted(line))

    def code_at(self, line: int) -> str | None:
        """The code of the finding reported on ``line`` of this version's source."""
        best = None
        for finding in self.findings:
            span = finding.span
            extent = span.end_line - span.line
            on_line = span.line == line or (span.line <= line <= span.end_line and extent < _MAX_JOIN_SPAN_LINES)
            if on_line and (best is None or extent < best[0]):
                best = (extent, finding.code)
        return best[1] if best else None

    def source_line(self, line: int) -> str:
        lines = self.source.splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""


@dataclass(kw_only=True)
class ScriptVersion(SourceFile):
    """One thing the harness runs: the script's file (the fields it inherits) and the
    files of the local modules it imports."""

    label: str  # "original" | "fixed": the key in the JSON report's "runs"
    description: str = ""  # e.g. "original + XLA104 device fixes"
    #: Run as plain PyTorch on the GPU, without XLA (the baseline of --device cuda --compare).
    native: bool = False
    modules: list[SourceFile] = field(default_factory=list)
    _by_real_path: dict[str, SourceFile] | None = field(default=None, init=False, repr=False, compare=False)

    def files(self) -> list[SourceFile]:
        return [self, *self.modules]

    def file_at(self, path: str) -> SourceFile | None:
        """The file of this version that ran as ``path`` (a frame's file), if any."""
        if path.startswith("<"):
            return None
        if self._by_real_path is None:
            self._by_real_path = {_real_path(str(file.run_path)): file for file in self.files()}
        return self._by_real_path.get(_real_path(path))

    def all_applied_fixes(self) -> list[AppliedFix]:
        """Every fix applied to the program's files (the script's, then its modules')."""
        return [fix for file in self.files() for fix in file.applied_fixes()]

    def fixed_files(self) -> dict[str, str]:
        """The user's file -> its fixed copy, for the files this version changed."""
        return {user: str(file.run_path) for user, file in self._changed().items()}

    def runs_the_same_code_as(self, other: ScriptVersion) -> bool:
        return {u: f.source for u, f in self._changed().items()} == {u: f.source for u, f in other._changed().items()}

    def _changed(self) -> dict[str, SourceFile]:
        """The user's file (real path) -> this version's copy, for the files it changed."""
        return {os.path.realpath(file.user_path or file.run_path): file for file in self.files() if file.changed}


# Every cause has a stack of frames, mostly in the same few files.
_real_path = functools.lru_cache(maxsize=4096)(os.path.realpath)


def lint(source: str, display_path: str, select: list[str] | None = None) -> list[Finding]:
    from xlalint.engine.api import lint_source

    return list(lint_source(source, display_path, select=select))


def original_file(user_file: UserFile) -> SourceFile:
    path = user_file.path.resolve()
    return SourceFile(
        run_path=path,
        source=user_file.source,
        findings=lint(user_file.source, user_file.display_path),
        display_path=user_file.display_path,
        user_path=path,
    )


def original_version(script: UserFile, modules: list[UserFile]) -> ScriptVersion:
    """The user's files as they are."""
    return _version(
        original_file(script), [original_file(m) for m in modules], label="original", description="original"
    )


def fixed_version(
    original: ScriptVersion,
    user_files: list[UserFile],
    workdir: Path,
    *,
    label: str,
    folder: str,
    unsafe: bool,
    select: list[str] | None = None,
    description: str,
    only: frozenset[AppliedFix] | None = None,
) -> ScriptVersion:
    """Fix the script and its local modules (``user_files``, in the order of
    ``original.files()``) into ``workdir/folder``, keeping their layout. ``only``:
    apply only these fixes (of a fix made before with the same options)."""
    from xlalint.engine.api import settings_for
    from xlalint.engine.follow import told_by
    from xlalint.engine.runner import imports_torch_xla

    pairs = list(zip(user_files, original.files(), strict=True))
    script = fixed_copy(*pairs[0], workdir / folder, unsafe=unsafe, select=select, only=only)
    # The modules of a script that is (or is fixed into) an XLA one run in an XLA program:
    # they are fixed as `xlalint fix` fixes the modules it follows (`Settings.xla_program`),
    # told what the fixed files before them iterate of theirs (`engine/follow.py`; the
    # modules come breadth first from the script, so an importer before what it imports).
    xla_program = imports_torch_xla(script.source)
    told: dict[str, set[str]] = {}

    def tell(fixed: SourceFile, user_file: UserFile) -> None:
        if xla_program:
            settings = settings_for(user_file.display_path)
            for real, names in told_by(fixed.source, str(user_file.path), settings, str(user_files[0].path)).items():
                told.setdefault(real, set()).update(names)

    tell(script, user_files[0])
    modules = []
    for user_file, unchanged in pairs[1:]:
        iterated = tuple(sorted(told.get(os.path.realpath(user_file.path), ())))
        module = fixed_copy(
            user_file,
            unchanged,
            workdir / folder,
            unsafe=unsafe,
            select=select,
            xla_program=xla_program,
            iterated=iterated,
            only=only,
        )
        tell(module, user_file)
        modules.append(module)
    return _version(script, modules, label=label, description=description)


def _version(script: SourceFile, modules: list[SourceFile], *, label: str, description: str) -> ScriptVersion:
    script_fields = {f.name: getattr(script, f.name) for f in fields(SourceFile)}
    return ScriptVersion(**script_fields, label=label, description=description, modules=modules)


def fixed_copy(
    user_file: UserFile,
    unchanged: SourceFile,
    folder: Path,
    *,
    unsafe: bool,
    select: list[str] | None = None,
    xla_program: bool = False,
    iterated: tuple[str, ...] = (),
    only: frozenset[AppliedFix] | None = None,
) -> SourceFile:
    """Fix one file (config is found from the user's path) into ``folder``; when the
    fix changes nothing, the user's own file runs (``unchanged``, already linted).
    ``xla_program``: the file is a local module of an XLA program, whose step loops
    iterate the results of its functions ``iterated``."""
    from xlalint.engine.api import fix_source, settings_for
    from xlalint.engine.follow import in_program

    settings = settings_for(user_file.display_path)
    if xla_program:
        settings = in_program(settings, iterated)
    keep = None
    if only is not None:

        def keep(finding: Finding, line: int | None) -> bool:
            return AppliedFix(user_file.display_path, finding.code, line) in only

    result = fix_source(
        user_file.source, user_file.display_path, unsafe=unsafe, select=select, settings=settings, keep=keep
    )
    fixed = result.source if not result.error else user_file.source
    if fixed == user_file.source:
        return replace(unchanged, applied=[], fix_error=result.error)
    run_path = folder / user_file.relative
    run_path.parent.mkdir(parents=True, exist_ok=True)
    # The same encoding (a coding cookie must stay true) and newline style.
    run_path.write_text(fixed, encoding=user_file.encoding, newline="")
    return SourceFile(
        run_path=run_path,
        source=fixed,
        findings=lint(fixed, user_file.display_path),
        line_map=LineMap(user_file.source, fixed),
        display_path=user_file.display_path,
        user_path=user_file.path.resolve(),
        applied=list(result.applied),
        applied_lines=list(result.applied_lines),
    )


def uses_cuda(version: ScriptVersion) -> bool:
    """Some file of the program calls CUDA (XLA104), so it cannot run on XLA as it is."""
    return any(f.code == "XLA104" for file in version.files() for f in file.findings)
