"""The rule catalog: every module ``xlalint/rules/xla*.py`` defines one rule (a package
``xlalint/rules/xla*/`` holds the parts of a rule whose module is beside it)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from xlalint.engine.rule import Rule


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("xla") or info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return tuple(sorted(found, key=lambda rule: rule.code))


@cache
def rules_by_code() -> dict[str, type[Rule]]:
    return {rule.code: rule for rule in all_rules()}
