"""Every rule's VALID and INVALID examples, run as tests.

An INVALID example must be flagged (``count`` times, when given). Its ``fixed`` is
what ``xlalint fix`` (safe fixes, this rule only) makes of it; ``None`` means the
safe fix leaves it unchanged. ``unsafe_fixed`` is what ``--unsafe-fixes`` makes of
it; ``None`` means the same as the safe result. Every fixed result must parse and
be left unchanged by a second fix.
"""

from __future__ import annotations

import ast

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.engine.rule import Rule
from xlalint.engine.runtimes import ONLY_FOR, TORCH_XLA
from xlalint.rules import all_rules

VALID = [pytest.param(rule, i, id=f"{rule.code}-valid-{i}") for rule in all_rules() for i in range(len(rule.VALID))]
INVALID = [
    pytest.param(rule, i, id=f"{rule.code}-invalid-{i}") for rule in all_rules() for i in range(len(rule.INVALID))
]


def settings_for(rule, example=None) -> Settings:
    options = tuple((example.options or {}).items()) if example else ()
    target = example.target_version if example and example.target_version else "2.9"
    major, minor = (int(p) for p in target.split("."))
    # A rule of one runtime only (XLA601: TorchTPU) runs its examples there.
    runtime = ONLY_FOR.get(rule.code, TORCH_XLA)
    return Settings(rule_settings=((rule.code, options),), target_version=(major, minor), target_runtime=runtime)


def at_work(rule) -> tuple[list | None, list[str] | None]:
    """The rules an example runs with (``rules=``, ``select=``): the rule alone, but a
    rule that judges the other rules' noqa codes (XLA100) with all of them at work."""
    if rule.after_suppression is not Rule.after_suppression:
        return None, None
    return [rule], [rule.code]


def test_every_rule_has_examples():
    for rule in all_rules():
        assert rule.VALID, f"{rule.code} has no VALID examples"
        assert rule.INVALID, f"{rule.code} has no INVALID examples"


@pytest.mark.parametrize("rule, index", VALID)
def test_valid(rule, index):
    example = rule.VALID[index]
    rules, _ = at_work(rule)
    findings = [
        f for f in lint_source(example.code, "example.py", settings_for(rule), rules=rules) if f.code == rule.code
    ]
    assert findings == [], f"{rule.code} flagged VALID example {index}:\n{example.code}"


@pytest.mark.parametrize("rule, index", INVALID)
def test_invalid(rule, index):
    example = rule.INVALID[index]
    settings = settings_for(rule, example)
    rules, select = at_work(rule)
    findings = [f for f in lint_source(example.code, "example.py", settings, rules=rules) if f.code == rule.code]
    assert findings, f"{rule.code} missed INVALID example {index}:\n{example.code}"
    if example.count is not None:
        assert len(findings) == example.count, [f.message for f in findings]

    safe = fix_source(example.code, "example.py", settings, select=select)
    assert safe.error is None, safe.error
    expected_safe = example.fixed if example.fixed is not None else example.code
    assert safe.source == expected_safe

    unsafe = fix_source(example.code, "example.py", settings, unsafe=True, select=select)
    assert unsafe.error is None, unsafe.error
    expected_unsafe = example.unsafe_fixed if example.unsafe_fixed is not None else expected_safe
    assert unsafe.source == expected_unsafe

    for fixed, is_unsafe in ((safe.source, False), (unsafe.source, True)):
        ast.parse(fixed)
        again = fix_source(fixed, "example.py", settings, unsafe=is_unsafe, select=select)
        assert again.source == fixed, "a second fix changed the code"
