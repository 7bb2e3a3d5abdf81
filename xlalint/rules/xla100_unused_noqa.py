"""XLA100 unused-noqa: a ``# noqa: XLAnnn`` that suppresses no finding on its line.

The engine asks this rule last (``after_suppression``): which ``# noqa`` hid a finding
is known only once every other rule reported and the comments were applied, as ruff
does for RUF100.
"""

from __future__ import annotations

from xlalint.engine.noqa import OWN_CODE_PREFIX, Suppressions, without_codes
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import Finding, ReplaceComment, Span


class UnusedNoqa(Rule):
    code = "XLA100"
    name = "unused-noqa"
    summary = "Unused `noqa` directive"
    explanation = """
## Why

A `# noqa: XLA104` that suppresses nothing hides nothing today, but it will hide the
next real finding on that line: the code it was written for has changed, and the
comment now only misleads the reader. This is ruff's RUF100 for xlalint's codes.

## What is flagged

A code of xlalint's (`XLAnnn`) in a `# noqa:` list that suppressed no finding on its
line (or the lines that continue onto it): one finding per comment, naming its unused
codes and the codes no rule has (`unknown`). Only when XLA100 itself is selected, in
files xlalint checks (that import torch, transformers, ...). A code whose rule is not
checked in the file (not selected, or turned off by `per-file-ignores`) is not
reported: whether it would hide a finding is not known (ruff calls it `non-enabled`;
removing it would bring findings back when the rule is turned on again). Other tools'
codes (`E501`) and a bare `# noqa` are left alone, and so is a comment that names
XLA100 itself. A malformed code (`# noqa: XLA1O4`) is not a finding: `check` warns
about it on stderr.

## Fix

safe: the unused codes are removed, or the whole comment when no code is left. The
other codes, the separators after them and any comment text around the directive are
kept byte for byte.

## Example

```python
x = torch.ones(2)  # noqa: XLA104, E501
```
becomes
```python
x = torch.ones(2)  # noqa: E501
```
"""
    fix_availability = "safe"

    # The examples run with every rule at work: a noqa is used when it hides a finding.
    VALID = [
        # The code suppresses a finding.
        Valid(
            """
            import torch
            x = torch.ones(2).cuda()  # noqa: XLA104
            """
        ),
        # Other tools' codes and a bare noqa are not ours to judge.
        Valid(
            """
            import torch
            x = torch.ones(2)  # noqa: E501
            y = torch.ones(2)  # noqa
            """
        ),
        # A comment that names XLA100 keeps its codes.
        Valid(
            """
            import torch
            x = torch.ones(2)  # noqa: XLA104, XLA100
            """
        ),
        # A noqa in a string is not a comment.
        Valid(
            """
            import torch
            text = "x = 1  # noqa: XLA104"
            """
        ),
    ]
    INVALID = [
        # The whole comment goes when no code is left.
        Invalid(
            """
            import torch
            x = torch.ones(2)  # noqa: XLA104
            """,
            fixed="""
            import torch
            x = torch.ones(2)
            """,
        ),
        # Only the unused code goes; the used one, the other tool's code, their
        # separators and the text after stay.
        Invalid(
            """
            import torch
            x = torch.ones(2).cuda()  # noqa: E501,XLA201 ,XLA104  # device move
            """,
            fixed="""
            import torch
            x = torch.ones(2).cuda()  # noqa: E501,XLA104  # device move
            """,
        ),
        # The comment text after the directive stays when the directive goes.
        Invalid(
            """
            import torch
            x = torch.ones(2)  # noqa: XLA104 # kept
            """,
            fixed="""
            import torch
            x = torch.ones(2)  # kept
            """,
        ),
        # A code no rule has; the comment before the directive stays.
        Invalid(
            """
            import torch
            x = torch.ones(2)  # type: ignore  # noqa: XLA999
            """,
            fixed="""
            import torch
            x = torch.ones(2)  # type: ignore
            """,
        ),
    ]

    def after_suppression(self, suppressions: Suppressions, enabled: frozenset[str]) -> None:
        if not suppressions.directives:
            return
        from xlalint.rules import rules_by_code  # the catalog, to tell unknown codes apart

        known = rules_by_code()
        for index, directive in enumerate(suppressions.directives):
            if self.code in directive.codes or not directive.items:
                continue
            # dicts as ordered sets: each code named once, in the comment's order
            kinds: dict[str, dict[str, None]] = {"unused": {}, "unknown": {}}
            for item in directive.items:
                code = item.code
                if not item.valid or not code.startswith(OWN_CODE_PREFIX) or (index, code) in suppressions.used:
                    continue
                if code in known and code not in enabled:
                    # Not checked here (not selected, per-file-ignores): whether it
                    # would hide a finding is not known, so it is not called unused.
                    continue
                kind = "unknown" if code not in known else "unused"
                kinds[kind][code] = None
            unused = {code for codes in kinds.values() for code in codes}
            if not unused:
                continue
            line_text = self.ctx.lines[directive.line - 1]
            start, end, text = without_codes(directive, unused, line_text)
            said = "; ".join(f"{kind}: {', '.join(f'`{c}`' for c in codes)}" for kind, codes in kinds.items() if codes)
            span = Span(directive.line, directive.col + directive.start, directive.line, directive.col + directive.end)
            edit = ReplaceComment(Span(directive.line, start, directive.line, end), text)
            fix = self.fix("safe", "Remove unused `noqa` directive", edit)
            self.findings.append(
                Finding(
                    code=self.code,
                    name=self.name,
                    message=f"{self.summary} ({said})",
                    path=self.ctx.path,
                    span=span,
                    fix=fix,
                    noqa_row=directive.line,
                    noqa_lines=(directive.line,),
                )
            )
