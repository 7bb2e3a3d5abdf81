"""Fixes made only of ``ReplaceComment`` operations (XLA100's), carried out on the text:
a comment is not part of the tree the other fixes are applied to, and an edit at the end
of a line moves no other operation's span (none reaches into a comment)."""

from __future__ import annotations

from collections.abc import Sequence

from xlalint.model import Fix, ReplaceComment, Span, split_lines


def is_comment_fix(fix: Fix) -> bool:
    return bool(fix.operations) and all(isinstance(op, ReplaceComment) for op in fix.operations)


def apply_comment_fixes(source: str, fixes: Sequence[Fix]) -> tuple[str, list[Fix]]:
    """``source`` with the comment fixes among ``fixes`` applied (one that overlaps an
    earlier one is left for the next pass), and those applied."""
    lines = split_lines(source, keepends=True)
    claimed: dict[int, list[Span]] = {}
    applied: list[Fix] = []
    for fix in fixes:
        if not is_comment_fix(fix):
            continue
        spans = [op.span for op in fix.operations]
        if any(
            not 1 <= span.line <= len(lines) or any(span.overlaps(other) for other in claimed.get(span.line, ()))
            for span in spans
        ):
            continue
        for span in spans:
            claimed.setdefault(span.line, []).append(span)
        applied.append(fix)
    # Right to left within a line, so that the columns of the edits still to make hold.
    edits = sorted((op for fix in applied for op in fix.operations), key=lambda op: (op.span.line, -op.span.col))
    for op in edits:
        text = lines[op.span.line - 1]
        lines[op.span.line - 1] = text[: op.span.col] + op.text + text[op.span.end_col :]
    return "".join(lines), applied
