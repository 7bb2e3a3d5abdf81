"""The rule catalog: every module ``xlalint/rules/xla*.py`` defines one rule (a package
``xlalint/rules/xla*/`` holds the parts of a rule whose module is beside it).

``rules_by_code`` knows every code from ``catalog.py`` (generated with the docs by
``python -m xlalint.docs``, checked current by tests/test_docs.py) and imports a rule's
module only when the rule itself is asked for: a warm (cached) check, which validates
its selectors against the codes and checks no file, imports no rule. A catalog that
does not name exactly the rule modules there are (one added since it was generated)
is not trusted: every module is imported, as ``all_rules`` does.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import TYPE_CHECKING

from xlalint.rules.catalog import MODULES

if TYPE_CHECKING:
    from xlalint.engine.rule import Rule


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for name in rule_modules():
        found += _rules_in(name).values()
    return tuple(sorted(found, key=lambda rule: rule.code))


@cache
def rule_modules() -> tuple[str, ...]:
    """The names of the rule modules (``xla104_cuda_device``), sorted."""
    return tuple(
        sorted(info.name for info in pkgutil.iter_modules(__path__) if info.name.startswith("xla") and not info.ispkg)
    )


@cache
def _rules_in(module_name: str) -> dict[str, type[Rule]]:
    """The rules the module ``module_name`` defines (not those it imports), by code."""
    from xlalint.engine.rule import Rule  # here: the codes alone need no rule API

    module = importlib.import_module(f"{__name__}.{module_name}")
    return {
        value.code: value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Rule)
        and value is not Rule
        and value.__module__ == module.__name__
    }


class RuleCatalog(Mapping[str, "type[Rule]"]):
    """Code -> rule, from the catalog: iterating it, ``len`` and ``in`` import nothing;
    ``catalog[code]`` imports that rule's module."""

    def __init__(self, modules: Mapping[str, str]):
        self._modules = dict(sorted(modules.items()))

    def __getitem__(self, code: str) -> type[Rule]:
        found = _rules_in(self._modules[code]).get(code)
        if found is None:  # moved to another module since the catalog was written
            return {rule.code: rule for rule in all_rules()}[code]
        return found

    def __contains__(self, code: object) -> bool:
        return code in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


@cache
def rules_by_code() -> Mapping[str, type[Rule]]:
    """Every rule by code, sorted by code."""
    if set(MODULES.values()) == set(rule_modules()):
        return RuleCatalog(MODULES)
    return {rule.code: rule for rule in all_rules()}


def rules_for(codes: Iterable[str]) -> tuple[type[Rule], ...]:
    """The rules of ``codes`` (known codes), sorted by code; only their modules are imported."""
    known = rules_by_code()
    return tuple(known[code] for code in sorted(set(codes)))
