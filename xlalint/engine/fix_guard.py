"""The fix loop's check of its own result: no fix may leave a file worse than it found it.

After a pass applies its fixes, the fixed text is checked (the loop's next pass needs
that check anyway). A finding of the fixed text that the pass's input did not have
means a fix made the file worse: the fix is withdrawn and the pass's input fixed
without it, and the finding it would have fixed stays, with the reason why.

Findings are matched across the edit by their code and the source text they flag (the
start of their first line): a multiset of those keys costs nothing next to the check
itself, and tells the common case (nothing new) at once. Only when a key is new are
the lines matched (``LineMap``, linear: unique lines as anchors, equal neighbours
grown from them): a finding on a line a fix wrote that the same rule flagged on the
code it replaced is the old finding, not a new one; the others are new, and named
in the reason by the line of the user's input.

Which fix to blame: the ones that wrote the new finding's line; for a finding on a
line no fix touched (XLA207 at the read of `running`, far below the rewritten
`running += loss.item()`), the fixes whose lines name what it flags; else all of the
pass. Several suspects are halved by re-applying without one half; every trial is a
re-apply and re-check, and a pass gets at most ``MAX_TRIALS``: past that, every fix of
the pass that is left is withdrawn. The cost stays linear in the file.
"""

from __future__ import annotations

import keyword
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from xlalint.model import Finding, Fix, MoveStatement, split_lines

# Re-applies and re-checks a pass may spend finding the fixes to withdraw.
MAX_TRIALS = 8
# How much of the flagged code a reason quotes.
QUOTE_LIMIT = 60


@dataclass
class Trial:
    """A pass's fixes applied: the text, the fixes the applier used, its findings."""

    source: str
    used: list[Fix]
    findings: list[Finding]


def finding_key(finding: Finding, lines: Sequence[str]) -> tuple[str, str]:
    """A finding as it survives an edit elsewhere: its code and the code it flags
    (from its start to the end of that line)."""
    span = finding.span
    text = lines[span.line - 1][span.col :] if 1 <= span.line <= len(lines) else ""
    return finding.code, text.strip()


def has_new_keys(
    old: Sequence[Finding], old_lines: Sequence[str], new: Sequence[Finding], new_lines: Sequence[str]
) -> bool:
    """The cheap test: does the fixed text have a finding key more often than the input?"""
    before = Counter(finding_key(f, old_lines) for f in old)
    after = Counter(finding_key(f, new_lines) for f in new)
    return any(count > before[key] for key, count in after.items())


# --- matching lines across an edit ---------------------------------------------------


class LineMap:
    """The lines an edit left as they were, matched between the old and the new text;
    the rest is grouped in hunks (an old range and the new range that replaced it).
    ``old_region[i]`` and ``new_region[j]`` name the same region for a matched pair
    and for the two sides of a hunk."""

    def __init__(self, old: Sequence[str], new: Sequence[str]):
        pairs = _matched_lines(old, new)
        self.new_to_old: list[int | None] = [None] * (len(new) + 1)
        self.old_region = [0] * (len(old) + 1)  # one past the end: a finding at the end of the file
        self.new_region = [0] * (len(new) + 1)
        # hunk id -> (old start, old end), 0-based, end exclusive
        self.hunks: dict[int, tuple[int, int]] = {}
        region = 0
        prev_i, prev_j = -1, -1
        for i, j in [*pairs, (len(old), len(new))]:
            if i > prev_i + 1 or j > prev_j + 1:
                region += 1
                self.hunks[region] = (prev_i + 1, i)
                for k in range(prev_i + 1, i):
                    self.old_region[k] = region
                for k in range(prev_j + 1, j):
                    self.new_region[k] = region
            region += 1
            self.old_region[i] = self.new_region[j] = region
            self.new_to_old[j] = i
            prev_i, prev_j = i, j

    def old_line(self, new_line: int) -> int | None:
        """The 1-based old line the new one was, None for a line an edit wrote."""
        if not 1 <= new_line <= len(self.new_to_old):
            return None
        old = self.new_to_old[new_line - 1]
        return None if old is None else old + 1

    def nearest_old_line(self, new_line: int) -> int | None:
        """The old line the new one was, or for a line an edit wrote the first line of
        the code that edit replaced (None for a line only inserted)."""
        old = self.old_line(new_line)
        if old is not None:
            return old
        hunk = self.hunk_of(new_line)
        return hunk[0] + 1 if hunk is not None and hunk[1] > hunk[0] else None

    def hunk_of(self, new_line: int) -> tuple[int, int] | None:
        """The old lines (0-based, end exclusive) that the hunk holding ``new_line`` replaced."""
        region = self.new_region[min(max(new_line - 1, 0), len(self.new_region) - 1)]
        return self.hunks.get(region)


def _matched_lines(old: Sequence[str], new: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs (old index, new index) of equal lines, increasing in both: the common
    head and tail, the lines unique on both sides in their longest common order, and
    the equal lines that follow or precede each of those. Linear but for the ordering
    of the anchors (n log n)."""
    n, m = len(old), len(new)
    head = 0
    while head < n and head < m and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and old[n - 1 - tail] == new[m - 1 - tail]:
        tail += 1
    anchors = _unique_anchors(old, new, head, n - tail, head, m - tail)
    pairs = [(k, k) for k in range(head)]
    bounds = [(head - 1, head - 1), *anchors, (n - tail, m - tail)]
    for (a0, b0), (a1, b1) in pairwise(bounds):
        i, j = a0 + 1, b0 + 1
        while i < a1 and j < b1:
            if old[i] == new[j]:
                pairs.append((i, j))
                i, j = i + 1, j + 1
                continue
            step = _resync(old, new, i, j, a1, b1)
            if step is None:
                break
            i, j = i + step[0], j + step[1]
        back: list[tuple[int, int]] = []
        k, h = a1 - 1, b1 - 1
        while k >= i and h >= j and old[k] == new[h]:
            back.append((k, h))
            k, h = k - 1, h - 1
        pairs.extend(reversed(back))
        if (a1, b1) != (n - tail, m - tail):
            pairs.append((a1, b1))
    pairs.extend((n - tail + k, m - tail + k) for k in range(tail))
    return pairs


# How far past a difference the equal lines are looked for, where no unique line anchors
# them (a file of identical lines): a fix writes or inserts a few lines at a time.
LOOKAHEAD = 4


def _resync(old: Sequence[str], new: Sequence[str], i: int, j: int, end_i: int, end_j: int) -> tuple[int, int] | None:
    """The smallest skip (old lines, new lines) after which two equal lines follow (or
    one that ends the gap), within ``LOOKAHEAD``."""
    for total in range(1, 2 * LOOKAHEAD + 1):
        for di in range(max(0, total - LOOKAHEAD), min(total, LOOKAHEAD) + 1):
            k, h = i + di, j + total - di
            equal = k < end_i and h < end_j and old[k] == new[h]
            if equal and (k + 1 == end_i or h + 1 == end_j or old[k + 1] == new[h + 1]):
                return di, total - di
    return None


def _unique_anchors(old: Sequence[str], new: Sequence[str], lo_a: int, hi_a: int, lo_b: int, hi_b: int):
    counts: dict[str, list[int]] = {}
    for i in range(lo_a, hi_a):
        entry = counts.setdefault(old[i], [0, 0, i, -1])
        entry[0] += 1
    for j in range(lo_b, hi_b):
        entry = counts.get(new[j])
        if entry is not None:
            entry[1] += 1
            entry[3] = j
    candidates = sorted((e[2], e[3]) for e in counts.values() if e[0] == 1 and e[1] == 1)
    # The longest run increasing in the new index too (patience sorting).
    tails: list[int] = []
    tail_at: list[int] = []
    previous: list[int] = []
    for index, (_, j) in enumerate(candidates):
        at = bisect_left(tails, j)
        if at == len(tails):
            tails.append(j)
            tail_at.append(index)
        else:
            tails[at], tail_at[at] = j, index
        previous.append(tail_at[at - 1] if at else -1)
    chain = []
    index = tail_at[-1] if tail_at else -1
    while index >= 0:
        chain.append(candidates[index])
        index = previous[index]
    return chain[::-1]


# --- which findings are new ----------------------------------------------------------


def new_findings(
    old: Sequence[Finding],
    old_lines: Sequence[str],
    new: Sequence[Finding],
    new_lines: Sequence[str],
    line_map: LineMap,
) -> list[Finding]:
    """The findings of the fixed text that the input did not have. The same rule
    flagging the same region (an unchanged line, or the hunk that replaced the code it
    flagged) is the same finding; one the edit moved is matched by its key."""
    left = Counter((_region(line_map.old_region, f), f.code) for f in old)
    unmatched = []
    for finding in new:
        region = (_region(line_map.new_region, finding), finding.code)
        if left[region] > 0:
            left[region] -= 1
        else:
            unmatched.append(finding)
    if not unmatched:
        return []
    moved = Counter()
    for finding in old:
        region = (_region(line_map.old_region, finding), finding.code)
        if left[region] > 0:
            left[region] -= 1
            moved[finding_key(finding, old_lines)] += 1
    out = []
    for finding in unmatched:
        key = finding_key(finding, new_lines)
        if moved[key] > 0:
            moved[key] -= 1
        else:
            out.append(finding)
    return out


def _region(regions: list[int], finding: Finding) -> int:
    return regions[min(max(finding.span.line - 1, 0), len(regions) - 1)]


# --- which fix to withdraw -----------------------------------------------------------


def settle(
    source: str,
    findings: list[Finding],
    fixes: list[Fix],
    first: Trial,
    apply: Callable[[list[Fix]], Trial],
    to_input: Callable[[int | None], int | None],
    fixed_next: Callable[[Finding], bool],
    kept: frozenset[Fix] = frozenset(),
) -> tuple[Trial, dict[Fix, str]]:
    """The pass's result without the fixes that make the file worse, and each fix
    withdrawn with the reason. ``first``: all ``fixes`` applied to ``source`` (whose
    findings are ``findings``); ``apply`` applies some of them; ``to_input`` takes a
    line of ``source`` to the user's input. A new finding the loop fixes in its next
    pass (``fixed_next``: one fix leads to another) does not count. The ``kept`` fixes
    (the port's) are never withdrawn: what only they bring, the port reveals (the
    optimizer built before a move that is a move to the XLA device once ported)."""
    old_lines = split_lines(source)
    result = first
    withdrawn: dict[Fix, str] = {}
    revealed: set[tuple[str, str]] = set()
    trials = 0
    while True:
        new_lines = split_lines(result.source)
        checked = [f for f in result.findings if not fixed_next(f)]
        if not result.used or not has_new_keys(findings, old_lines, checked, new_lines):
            return result, withdrawn
        line_map = LineMap(old_lines, new_lines)
        brought = [
            f
            for f in new_findings(findings, old_lines, checked, new_lines, line_map)
            if finding_key(f, new_lines) not in revealed
        ]
        if not brought:
            return result, withdrawn
        regression = brought[0]
        key = finding_key(regression, new_lines)
        why = reason(regression, new_lines, _through(line_map, to_input))
        if trials >= MAX_TRIALS:
            # The worst case: every fix of the pass that is left.
            withdrawn.update((fix, why) for fix in result.used)
            return Trial(source, [], findings), withdrawn
        suspects = [
            fix for fix in _suspects(regression, result.used, old_lines, new_lines, line_map) if fix not in kept
        ]
        if not suspects:
            revealed.add(key)
            continue
        before = sum(1 for f in findings if finding_key(f, old_lines) == key)
        while len(suspects) > 1 and trials < MAX_TRIALS - 1:
            # Halve the suspects: re-apply without one half; is the finding gone?
            half = suspects[: len(suspects) // 2]
            trials += 1
            trial = apply([fix for fix in fixes if fix not in withdrawn and fix not in half])
            suspects = half if _count(trial, key) <= before else suspects[len(suspects) // 2 :]
        withdrawn.update((fix, why) for fix in suspects)
        trials += 1
        result = apply([fix for fix in fixes if fix not in withdrawn])


def _through(line_map: LineMap, to_input: Callable[[int | None], int | None]) -> Callable[[int], int | None]:
    return lambda line: to_input(line_map.nearest_old_line(line))


def _count(trial: Trial, key: tuple[str, str]) -> int:
    lines = split_lines(trial.source)
    return sum(1 for f in trial.findings if finding_key(f, lines) == key)


def _suspects(
    finding: Finding, used: list[Fix], old_lines: Sequence[str], new_lines: Sequence[str], line_map: LineMap
) -> list[Fix]:
    """The fixes that may have brought ``finding``: those that wrote its line; else
    those whose lines name what it flags; else all."""
    hunk = line_map.hunk_of(finding.span.line) if line_map.old_line(finding.span.line) is None else None
    if hunk is not None:
        start, end = hunk
        wrote = [fix for fix in used if any(a <= end and start <= b + 1 for a, b in _fix_lines(fix))]
        if not wrote and _is_import_hunk(old_lines, start, end):
            wrote = [fix for fix in used if fix.imports]
        if wrote:
            return wrote
    names = set(_NAME.findall(_flagged(finding, new_lines))) - _KEYWORDS
    if names:
        naming = [
            fix
            for fix in used
            if any(
                names & set(_NAME.findall(old_lines[k])) for a, b in _fix_lines(fix) for k in _clipped(a, b, old_lines)
            )
        ]
        if naming:
            return naming
    return list(used)


def _fix_lines(fix: Fix) -> list[tuple[int, int]]:
    """The 0-based line ranges (inclusive) of the old text a fix's operations name."""
    ranges = []
    for op in fix.operations:
        ranges.append((op.span.line - 1, op.span.end_line - 1))
        if isinstance(op, MoveStatement):
            ranges.append((op.anchor.line - 1, op.anchor.end_line - 1))
    return ranges


def _clipped(a: int, b: int, lines: Sequence[str]) -> range:
    return range(max(a, 0), min(b, len(lines) - 1) + 1)


def _is_import_hunk(lines: Sequence[str], start: int, end: int) -> bool:
    """A hunk among the imports (where the fixes' imports go)."""
    near = [lines[k].lstrip() for k in range(max(start - 1, 0), min(end + 1, len(lines)))]
    return any(line.startswith(("import ", "from ")) for line in near)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset([*keyword.kwlist, "self"])


def _flagged(finding: Finding, lines: Sequence[str]) -> str:
    """The code a finding flags, on its first line."""
    span = finding.span
    if not 1 <= span.line <= len(lines):
        return ""
    line = lines[span.line - 1]
    return line[span.col : span.end_col] if span.end_line == span.line else line[span.col :]


# --- the reason ------------------------------------------------------------------------

_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")


def reason(finding: Finding, lines: Sequence[str], to_input: Callable[[int], int | None]) -> str:
    """Why a fix was withheld, for a person: the finding it would bring (code, line of
    the input, the code flagged and the gist of the message), ``lines`` the text it is in."""
    line = to_input(finding.span.line)
    where = f"line {line}" if line is not None else f"line {finding.span.line} of the fixed code"
    flagged = " ".join(_flagged(finding, lines).split())
    if len(flagged) > QUOTE_LIMIT:
        flagged = flagged[: QUOTE_LIMIT - 3] + "..."
    quoted = f" (`{flagged}`)" if flagged and "`" not in flagged else ""
    gist = _gist(finding.message)

    def in_input(match: re.Match) -> str:
        mapped = to_input(int(match.group(1)))
        return f"line {mapped}" if mapped is not None else match.group(0)

    gist = _LINE_REFERENCE.sub(in_input, gist)
    return f"not applied: it would bring {finding.code} at {where}{quoted}: {gist}"


def _gist(message: str) -> str:
    """A message up to its first ": " outside backquotes (what is wrong, not the advice)."""
    quoted = False
    for at, char in enumerate(message):
        if char == "`":
            quoted = not quoted
        elif not quoted and message.startswith(": ", at):
            return message[:at]
    return message
