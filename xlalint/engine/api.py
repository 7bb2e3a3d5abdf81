"""The engine as a library: check or fix source text, with config found from its path."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from xlalint.engine import fixing
from xlalint.engine import lint as engine
from xlalint.engine.config import ConfigFinder, Settings
from xlalint.engine.fixing import FixResult
from xlalint.model import Finding
from xlalint.rules import rules_by_code

__all__ = ["Finding", "FixResult", "fix_source", "lint_source", "settings_for"]


def settings_for(path: str | Path, config: str | Path | None = None) -> Settings:
    finder = ConfigFinder(Path(config) if config else None, rules_by_code())
    return finder.for_path(Path(path).absolute())


def lint_source(
    source: str, path: str, *, select: Iterable[str] | None = None, settings: Settings | None = None
) -> list[Finding]:
    return engine.lint_source(source, path, settings or settings_for(path), select=select)


def fix_source(
    source: str,
    path: str,
    *,
    unsafe: bool = False,
    select: Iterable[str] | None = None,
    settings: Settings | None = None,
    keep: Callable[[Finding, int | None], bool] | None = None,
) -> FixResult:
    """``keep``: apply only some fixes (see ``fixing.fix_source``)."""
    return fixing.fix_source(source, path, settings or settings_for(path), unsafe=unsafe, select=select, keep=keep)
