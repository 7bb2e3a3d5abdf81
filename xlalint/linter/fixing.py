"""The fix loop: apply, re-parse, re-check, until nothing changes.

At most ``MAX_PASSES`` passes; code that would not parse, or fixes that never settle,
leave the original untouched and say why in ``FixResult.error``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field

from xlalint.linter.config import Settings
from xlalint.linter.engine import SYNTAX_ERROR, lint_source
from xlalint.linter.model import Finding

MAX_PASSES = 10


@dataclass
class FixResult:
    source: str
    applied: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    error: str | None = None

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
) -> FixResult:
    if source.startswith("\ufeff"):
        result = fix_source(source[1:], path, settings, unsafe=unsafe, select=select)
        result.source = "\ufeff" + result.source
        return result
    if "\r" in source and "\n" not in source:
        # Old Mac newlines: libcst does not keep a lone "\r" at the end of the file, so
        # fix with "\n" and put the "\r" back (lines and columns are the same).
        result = fix_source(source.replace("\r", "\n"), path, settings, unsafe=unsafe, select=select)
        result.source = result.source.replace("\n", "\r")
        return result
    from xlalint.fixers.apply import BeyondRewriter, apply_fixes
    from xlalint.fixers.layout import line_length_for

    settings = settings or Settings()
    # Fixed lines keep to the length the project formats to (ruff's or black's setting).
    line_length = line_length_for(path)
    select = tuple(select) if select is not None else None
    current = source
    applied: list[Finding] = []
    for _ in range(MAX_PASSES):
        findings = lint_source(current, path, settings, select=select)
        if any(f.code == SYNTAX_ERROR[0] for f in findings):
            return FixResult(current, applied, findings)
        fixable = [f for f in findings if wanted(f, unsafe)]
        if not fixable:
            return FixResult(current, applied, findings)
        fixes = list(dict.fromkeys(f.fix for f in fixable))
        try:
            new, used = apply_fixes(current, fixes, line_length)
        except RecursionError:
            return _failed(source, path, settings, select, "cannot fix: the code is nested too deeply")
        except BeyondRewriter:
            return _failed(source, path, settings, select, "cannot fix: the file is too deep or too large to rewrite")
        except Exception as exc:  # a bug in a fixer must not cost the user their file
            return _failed(source, path, settings, select, f"internal error while fixing: {describe(exc)}")
        if not used or new == current:
            return FixResult(current, applied, findings)
        used = set(used)  # membership below, for every finding
        try:
            ast.parse(new)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            codes = ", ".join(sorted({f.code for f in fixable if f.fix in used}))
            reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
            return _failed(
                source,
                path,
                settings,
                select,
                f"a fix ({codes}) produced code that does not parse ({reason}); file left unchanged",
            )
        applied.extend(f for f in fixable if f.fix in used)
        current = new
    findings = lint_source(current, path, settings, select=select)
    if any(wanted(f, unsafe) for f in findings):
        codes = ", ".join(sorted({f.code for f in findings if wanted(f, unsafe)}))
        return _failed(
            source,
            path,
            settings,
            select,
            f"fixes ({codes}) did not converge after {MAX_PASSES} passes; file left unchanged",
        )
    return FixResult(current, applied, findings)


def describe(exc: BaseException, limit: int = 300) -> str:
    """An exception in one short line: libcst's parser errors quote the code around the
    error over many lines (20 KB for a long line); the first paragraph says what went wrong."""
    paragraph = str(exc).strip().split("\n\n")[0]
    text = " ".join(line.strip() for line in paragraph.splitlines())
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _failed(source: str, path: str, settings: Settings, select: tuple[str, ...] | None, error: str) -> FixResult:
    return FixResult(source, [], lint_source(source, path, settings, select=select), error)
