"""The fix loop: apply, re-parse, re-check, until nothing changes.

At most ``MAX_PASSES`` passes; code that would not parse, or fixes that never settle,
leave the original untouched and say why in ``FixResult.error``.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from xlalint.engine import fix_guard, memory
from xlalint.engine.config import Settings
from xlalint.engine.lint import PORT_CODE, SYNTAX_ERROR, forget_parsed, lint_source
from xlalint.model import Finding, Fix, split_lines

MAX_PASSES = 10


@dataclass
class FixResult:
    source: str
    applied: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    error: str | None = None
    #: How many findings the input had (what ``check`` reports on it).
    checked: int | None = None
    #: For each of ``applied``: its line in the input (None: a line a fix wrote), which
    #: with its code and path names the fix across passes (see ``keep``).
    applied_lines: list[int | None] = field(default_factory=list)

    def changed(self, original: str) -> bool:
        return self.source != original


def wanted(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe)


def fix_source(
    source: str,
    path: str = "<stdin>",
    settings: Settings | None = None,
    *,
    unsafe: bool = False,
    select: Iterable[str] | None = None,
    keep: Callable[[Finding, int | None], bool] | None = None,
) -> FixResult:
    """The fixed source, the fixes applied, the findings left, and how many ``check``
    found on ``source`` (``checked``: a fix can remove code that had another finding,
    and the port can reveal findings, so fixed + remaining may differ from it).
    ``keep(finding, line)``: apply only the fixes of findings it accepts, ``line``
    being the finding's line in the input (None: on a line a fix wrote), so that a
    subset of the fixes of a whole fix can be applied again (the harness's bisect)."""
    counted: list[int] = []
    result = _fix_source(source, path, settings, unsafe=unsafe, select=select, keep=keep, counted=counted)
    if result.checked is None:
        result.checked = counted[0] if counted else len(result.remaining)
    return result


def _fix_source(
    source: str,
    path: str,
    settings: Settings | None,
    *,
    unsafe: bool,
    select: Iterable[str] | None,
    keep: Callable[[Finding, int | None], bool] | None,
    counted: list[int],
) -> FixResult:
    if source.startswith("\ufeff"):
        result = fix_source(source[1:], path, settings, unsafe=unsafe, select=select, keep=keep)
        result.source = "\ufeff" + result.source
        return result
    if "\r" in source and "\n" not in source:
        # Old Mac newlines: libcst does not keep a lone "\r" at the end of the file, so
        # fix with "\n" and put the "\r" back (lines and columns are the same).
        result = fix_source(source.replace("\r", "\n"), path, settings, unsafe=unsafe, select=select, keep=keep)
        result.source = result.source.replace("\n", "\r")
        return result
    settings = settings or Settings()
    too_large = memory.over_fix_limit(source)
    if too_large is not None:  # before any work: libcst's tree of it would not fit the memory budget
        return _failed(source, path, settings, tuple(select) if select is not None else None, too_large)
    from xlalint.fixers.apply import BeyondRewriter, apply_fixes
    from xlalint.fixers.layout import line_length_for

    # Fixed lines keep to the length the project formats to (ruff's or black's setting).
    line_length = line_length_for(path)
    select = tuple(select) if select is not None else None
    current = source
    applied: list[Finding] = []
    applied_lines: list[int | None] = []
    texts = _Texts(source)
    withheld: list[_Withheld] = []
    findings = lint_source(current, path, settings, select=select)
    counted.append(len(findings))
    for _ in range(MAX_PASSES):
        if any(f.code == SYNTAX_ERROR[0] for f in findings):
            return FixResult(current, applied, _marked(findings, withheld, texts), applied_lines=applied_lines)
        fixable = [f for f in findings if wanted(f, unsafe) and not _is_withheld(f, withheld, texts)]
        if keep is not None:
            fixable = [f for f in fixable if keep(f, texts.to_input(f.span.line))]
        if not fixable:
            return FixResult(current, applied, _marked(findings, withheld, texts), applied_lines=applied_lines)
        fixes = list(dict.fromkeys(f.fix for f in fixable))

        def apply(chosen: list[Fix], base: str = current) -> fix_guard.Trial:
            forget_parsed()  # the ast tree of the text goes before libcst's is made
            new, used = apply_fixes(base, chosen, line_length)
            if not used or new == base:
                return fix_guard.Trial(base, [], [])
            try:
                ast.parse(new)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                raise _Unparsable(used, exc) from None
            return fix_guard.Trial(new, used, lint_source(new, path, settings, select=select))

        try:
            first = apply(fixes)
            if not first.used:
                return FixResult(current, applied, _marked(findings, withheld, texts), applied_lines=applied_lines)
            # The port's fixes stay: a finding only they bring is one the port reveals.
            port = frozenset(f.fix for f in fixable if f.code == PORT_CODE)
            result, withdrawn = fix_guard.settle(
                current, findings, fixes, first, apply, texts.to_input, lambda f: wanted(f, unsafe), port
            )
        except RecursionError:
            return _failed(source, path, settings, select, "cannot fix: the code is nested too deeply")
        except BeyondRewriter:
            return _failed(source, path, settings, select, "cannot fix: the file is too deep or too large to rewrite")
        except _Unparsable as exc:
            codes = ", ".join(sorted({f.code for f in fixable if f.fix in exc.used}))
            return _failed(
                source,
                path,
                settings,
                select,
                f"a fix ({codes}) produced code that does not parse ({exc.reason}); file left unchanged",
            )
        except Exception as exc:  # a bug in a fixer must not cost the user their file
            return _failed(source, path, settings, select, f"internal error while fixing: {describe(exc)}")
        pass_index = len(texts.texts) - 1
        withheld += [
            _Withheld(
                f.code, pass_index, f.span.line, fix_guard.finding_key(f, texts.lines(pass_index)), withdrawn[f.fix]
            )
            for f in fixable
            if f.fix in withdrawn
        ]
        if not result.used:
            return FixResult(current, applied, _marked(findings, withheld, texts), applied_lines=applied_lines)
        used = set(result.used)  # membership below, for every finding
        now_applied = [f for f in fixable if f.fix in used]
        applied.extend(now_applied)
        applied_lines.extend(texts.to_input(f.span.line) for f in now_applied)
        current, findings = result.source, result.findings
        texts.add(current)
    if any(wanted(f, unsafe) and not _is_withheld(f, withheld, texts) for f in findings):
        codes = ", ".join(sorted({f.code for f in findings if wanted(f, unsafe)}))
        return _failed(
            source,
            path,
            settings,
            select,
            f"fixes ({codes}) did not converge after {MAX_PASSES} passes; file left unchanged",
        )
    return FixResult(current, applied, _marked(findings, withheld, texts), applied_lines=applied_lines)


class _Unparsable(Exception):
    def __init__(self, used: list[Fix], exc: BaseException):
        super().__init__()
        self.used = set(used)
        self.reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__


class _Texts:
    """The text after each pass, and the lines of each matched to the one before
    (only when asked: when a fix was withheld)."""

    def __init__(self, source: str):
        self.texts = [source]
        self._lines: dict[int, list[str]] = {}
        self._maps: dict[int, fix_guard.LineMap] = {}

    def add(self, text: str) -> None:
        self.texts.append(text)

    def lines(self, index: int) -> list[str]:
        if index not in self._lines:
            self._lines[index] = split_lines(self.texts[index])
        return self._lines[index]

    def back(self, line: int | None, since: int, until: int = 0) -> int | None:
        """A 1-based line of text ``since`` as a line of the earlier text ``until``."""
        for index in range(since, until, -1):
            if line is None:
                return None
            if index not in self._maps:
                self._maps[index] = fix_guard.LineMap(self.lines(index - 1), self.lines(index))
            line = self._maps[index].old_line(line)
        return line

    def to_input(self, line: int | None) -> int | None:
        """A line of the latest text as a line of the user's input."""
        return self.back(line, len(self.texts) - 1)


@dataclass(frozen=True)
class _Withheld:
    """A finding whose fix was withdrawn, as it was in the text of pass ``index``."""

    code: str
    index: int
    line: int
    key: tuple[str, str]
    reason: str


def _is_withheld(finding: Finding, withheld: list[_Withheld], texts: _Texts) -> bool:
    return _withheld_reason(finding, withheld, texts) is not None


def _withheld_reason(finding: Finding, withheld: list[_Withheld], texts: _Texts) -> str | None:
    """The reason the fix of ``finding`` (a finding of the latest text) was withdrawn
    in an earlier pass: the same rule on the same line, or on the same code when the
    line was rewritten since."""
    latest = len(texts.texts) - 1
    for entry in withheld:
        if entry.code != finding.code:
            continue
        line = texts.back(finding.span.line, latest, entry.index)
        if line == entry.line or (line is None and fix_guard.finding_key(finding, texts.lines(latest)) == entry.key):
            return entry.reason
    return None


def _marked(findings: list[Finding], withheld: list[_Withheld], texts: _Texts) -> list[Finding]:
    """The findings left, those whose fix was withheld without it and with the reason."""
    if not withheld:
        return findings
    out = []
    for finding in findings:
        reason = _withheld_reason(finding, withheld, texts)
        out.append(dataclasses.replace(finding, fix=None, fix_withheld=reason) if reason else finding)
    return out


def describe(exc: BaseException, limit: int = 300) -> str:
    """An exception in one short line: libcst's parser errors quote the code around the
    error over many lines (20 KB for a long line); the first paragraph says what went wrong."""
    paragraph = str(exc).strip().split("\n\n")[0]
    text = " ".join(line.strip() for line in paragraph.splitlines())
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _failed(source: str, path: str, settings: Settings, select: tuple[str, ...] | None, error: str) -> FixResult:
    return FixResult(source, [], lint_source(source, path, settings, select=select), error)
