"""``xlalint check --show-settings FILE``: the configuration resolved for one file, for
whoever asks why a rule does or does not fire there (as ``ruff check --show-settings``).
Values are shown as they are written in the config file (TOML)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xlalint.engine.config import FIX_SELECTOR_KEYS, Settings
from xlalint.engine.escaping import printable
from xlalint.engine.runtimes import active_codes


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def describe(path: Path, settings: Settings, rules: list, cache: Path | None = None) -> str:
    """The settings for ``path``: config file, selection (as written and as resolved for
    this file), target version, exclusion and each enabled rule's options; ``cache``:
    the folder ``check`` keeps its cache in, when run where this is (``--no-cache``: none)."""
    codes = [rule.code for rule in rules]
    enabled = active_codes(settings, codes, str(path))
    everywhere = active_codes(settings, codes)
    major, minor = settings.target_version
    lines = [
        f"Resolved settings for: {printable(str(path))}",
        f"config file: {printable(settings.source) if settings.source else 'none (defaults)'}",
        f"project root: {printable(settings.root) if settings.root else 'none (no config file)'}",
        *([f"cache: {printable(str(cache.absolute()))}"] if cache is not None else []),
        f'target-version = "{major}.{minor}"',
        f'target-runtime = "{settings.target_runtime}"',
        f"select = {toml_value(settings.select)}",
        f"extend-select = {toml_value(settings.extend_select)}",
        f"ignore = {toml_value(settings.ignore)}",
    ]
    for select, extend_select, ignore in settings.overrides:
        parts = [f"--select {','.join(select)}"] if select is not None else []
        parts += [f"--extend-select {','.join(extend_select)}"] if extend_select else []
        parts += [f"--ignore {','.join(ignore)}"] if ignore else []
        lines.append(f"command line: {' '.join(parts)}")
    lines.append(f"exclude = {toml_value(settings.exclude)}")
    lines.append(f"extend-exclude = {toml_value(settings.extend_exclude)}")
    if settings.command_line_exclude:
        lines.append(f"command line: --extend-exclude {','.join(settings.command_line_exclude)}")
    unsafe = settings.unsafe_fixes
    lines.append(f"unsafe-fixes = {toml_value(unsafe) if unsafe is not None else 'hint (not set)'}")
    lines += [f"{key} = {toml_value(getattr(settings, key.replace('-', '_')))}" for key in FIX_SELECTOR_KEYS]
    if settings.per_file_ignores:
        lines.append("per-file-ignores:")
        lines += [f"  {toml_value(glob)} = {toml_value(list(codes))}" for glob, codes in settings.per_file_ignores]
    lines.append(
        "excluded: yes (skipped in folder walks; checked when named, unless --force-exclude)"
        if settings.is_excluded(path)
        else "excluded: no"
    )
    lines.append(f"enabled rules ({len(enabled)} of {len(codes)}):")
    for rule in rules:
        if rule.code not in enabled:
            continue
        options = settings.rule_options(rule.code, rule.options)
        shown = ", ".join(f"{key} = {toml_value(value)}" for key, value in options.items())
        lines.append(f"  {rule.code} {rule.name}" + (f" ({shown})" if shown else ""))
    off_here = sorted(everywhere - enabled)
    if off_here:
        lines.append(f"turned off for this file by per-file-ignores: {', '.join(off_here)}")
    return "\n".join(lines)
