"""Configuration: ``[tool.xlalint]`` in ``pyproject.toml``, or ``xlalint.toml``.

The nearest file walking up from a checked file wins (``xlalint.toml`` before
``pyproject.toml`` in the same folder; a ``pyproject.toml`` without a
``[tool.xlalint]`` table is passed over). In ``xlalint.toml`` the keys are at the
top level. Command-line options override the file. Unknown keys are errors that
name the key.
"""

from __future__ import annotations

import difflib
import functools
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

Applicability = Literal["safe", "unsafe", ""]

DEFAULT_TARGET = (2, 9)
# The backends a port can write for: torch_xla (the default) or TorchTPU (`torch.tpu`);
# which rules run for each: engine/runtimes.py.
TORCH_XLA = "torch-xla"
TORCH_TPU = "torch-tpu"
TARGET_RUNTIMES = (TORCH_XLA, TORCH_TPU)
DEFAULT_RUNTIME = TORCH_XLA
# Real config files are a few KiB; parsing and checking one of 18 MB took 23 s and 470 MB.
CONFIG_MAX_BYTES = 1024 * 1024
KNOWN_KEYS = {
    "select",
    "ignore",
    "extend-select",
    "exclude",
    "extend-exclude",
    "per-file-ignores",
    "target-version",
    "rules",
    "unsafe-fixes",
    "fixable",
    "unfixable",
    "extend-safe-fixes",
    "extend-unsafe-fixes",
}
# The fix controls that take rule selectors, as ruff's.
FIX_SELECTOR_KEYS = ("fixable", "unfixable", "extend-safe-fixes", "extend-unsafe-fixes")
KNOWN_KEYS.add("target-runtime")
# `follow-imports`: whether `check`/`fix` also check the local modules a checked file imports.
KNOWN_KEYS.add("follow-imports")

# Folders never walked into (as ruff's default `exclude`).
DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    ".xlalint_cache",
    "__pypackages__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


class ConfigError(Exception):
    """A configuration problem, said in one line."""


# Where an unknown rule code is pointed: the list of every rule, one line each.
RULE_LIST_COMMAND = "xlalint rule --all --output-format concise"


def did_you_mean(value: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """`` (did you mean `X`?)`` for the closest of ``known`` to ``value`` (the first in
    sorted order on a tie, so that the answer does not depend on set order), or ""."""
    scored = [(difflib.SequenceMatcher(None, value, name).ratio(), name) for name in sorted(set(known))]
    best = max(scored, key=lambda pair: pair[0], default=(0.0, ""))
    return f" (did you mean `{best[1]}`?)" if best[0] >= cutoff else ""


def unknown_rule(description: str, code: str, known_codes: Iterable[str], *, prefixes: bool = True) -> str:
    """An unknown code (``XLA1O4``), the near miss and where the rules are listed.
    ``prefixes``: whether a prefix of a code is accepted where ``code`` was given (a
    selector) or only a whole code (``xlalint rule``, a ``[rules]`` table): only what is
    accepted there is suggested, and never ``code`` itself."""
    # A selector is a code or a prefix of one: its near misses are the codes' prefixes of
    # its length, one character off (`XLA1O4`: `XLA104`; `XLA1O`: `XLA10`; `XLA9`: none).
    candidates = {known[: len(code)] for known in known_codes} if prefixes else set(known_codes)
    near = did_you_mean(code, candidates - {code}, cutoff=0.8)
    return f"{description} `{code}`{near}; `{RULE_LIST_COMMAND}` lists the rules"


class DeclaresOptions(Protocol):
    """What config needs to know of a rule: the options it declares. The caller passes
    the known rules in (``rules_by_code()``); config does not import the rule catalog."""

    options: Mapping[str, Any]


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    target_version: tuple[int, int] = DEFAULT_TARGET
    #: ``target-runtime``: the backend the port writes for (``TARGET_RUNTIMES``).
    target_runtime: str = DEFAULT_RUNTIME
    rule_settings: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    #: The folder the config file is in (globs are relative to it), or None.
    root: str | None = None
    source: str | None = None
    #: Later selections (the command line's) as ``(select or None, extend_select, ignore)``,
    #: applied on top of the file's, as ruff does.
    overrides: tuple[tuple[tuple[str, ...] | None, tuple[str, ...], tuple[str, ...]], ...] = ()
    #: ``extend-exclude``: globs excluded on top of ``exclude`` (relative to ``root``).
    extend_exclude: tuple[str, ...] = ()
    #: ``--extend-exclude``: globs relative to the folder the command was run in.
    command_line_exclude: tuple[str, ...] = ()
    command_line_root: str | None = None
    #: ``unsafe-fixes``: True applies unsafe fixes, False also hides the hint that there
    #: are some, None (not set) hints at them, as ruff's.
    unsafe_fixes: bool | None = None
    #: Which rules' fixes are offered at all (``fixable`` minus ``unfixable``), and the
    #: rules whose fixes count as safe or unsafe whatever the rule says.
    fixable: tuple[str, ...] = ("ALL",)
    unfixable: tuple[str, ...] = ()
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()
    #: ``follow-imports``: `check`/`fix` also check (and fix) the local modules the
    #: checked files import (``engine/follow.py``).
    follow_imports: bool = True
    #: Set by following imports (``engine/follow.py``), never by a config: the file is a
    #: local module of a program that uses torch_xla (or that its fixes port), so the
    #: rules scoped to an XLA script's code that runs on the device apply to it too
    #: (XLA307, XLA308: a ``generate`` in ``model.py`` runs on XLA tensors).
    xla_program: bool = False
    #: Set by following imports (``engine/follow.py``), never by a config: the
    #: module-level functions of this module whose results a step loop of an XLA script
    #: that imports it iterates (``loader = prepare_dataloader(32)`` in ``train.py``), sorted.
    #: The loaders they return are training loaders (XLA301). With them, sorted in, what
    #: those scripts pass the functions' parameters (``"train_one_epoch(5=update)"``: a
    #: step callable, the loop calling it trains; ``analysis/told.py``). Part of the cache key.
    iterated_by_importers: tuple[str, ...] = ()

    # -- which rules run -------------------------------------------------------------
    def enabled_codes(self, all_codes: Iterable[str], path: str | None = None) -> set[str]:
        """ruff's resolution: each layer (the file, then the command line) either starts
        afresh (it has ``select``) or adjusts the layer before; within a layer the more
        specific selector wins, and ``ignore`` wins a tie."""
        codes = sorted(all_codes)
        enabled: set[str] = set()
        for select, extend_select, ignore in ((self.select, self.extend_select, self.ignore), *self.overrides):
            decided: dict[str, bool] = {}
            for selector, on in sorted(
                [(s, True) for s in (*(select or ()), *extend_select)] + [(s, False) for s in ignore],
                key=lambda item: (_specificity(item[0]), not item[1]),
            ):
                for code in codes:
                    if _matches_any(code, (selector,)):
                        decided[code] = on
            if select is not None:
                enabled = {code for code, on in decided.items() if on}
            else:
                enabled = (enabled | {c for c, on in decided.items() if on}) - {
                    c for c, on in decided.items() if not on
                }
        if path is not None and self.per_file_ignores:
            names = PathNames(path, self.root)
            for glob, ignored in self.per_file_ignores:
                if _globs((glob,)).matches(names):
                    enabled -= {c for c in codes if _matches_any(c, ignored)}
        return enabled

    def rule_options(self, code: str, declared: dict[str, Any]) -> dict[str, Any]:
        values = {key: option.default for key, option in declared.items()}
        for rule_code, options in self.rule_settings:
            if rule_code != code:
                continue
            for key, value in options:
                if key not in declared:
                    known = ", ".join(sorted(declared)) or "none"
                    raise ConfigError(
                        f"unknown option `{key}` for rule {code}{did_you_mean(key, declared)} (known: {known})"
                    )
                values[key] = declared[key].validate(key, value)
        return values

    def fix_policy(self, all_codes: Iterable[str]) -> dict[str, Applicability | None]:
        """Code -> how its fixes are offered: None when the rule is not fixable
        (``fixable``/``unfixable``, resolved as select/ignore are: the more specific
        selector wins, ``unfixable`` a tie), else the applicability that
        ``extend-safe-fixes``/``extend-unsafe-fixes`` force ("safe"/"unsafe"; the more
        specific selector wins, ``extend-unsafe-fixes`` a tie), or "" for the rule's own."""
        codes = sorted(all_codes)
        fixable = _resolve(codes, [(s, True) for s in self.fixable] + [(s, False) for s in self.unfixable])
        forced = _resolve(
            codes, [(s, "safe") for s in self.extend_safe_fixes] + [(s, "unsafe") for s in self.extend_unsafe_fixes]
        )
        return {code: forced.get(code, "") if fixable.get(code) else None for code in codes}

    def is_excluded(self, path: Path) -> bool:
        if self.command_line_exclude and _globs(self.command_line_exclude).matches(
            PathNames(str(path), self.command_line_root)
        ):
            return True
        globs = self.exclude + self.extend_exclude
        if not globs:
            return False
        return _globs(globs).matches(PathNames(str(path), self.root))

    def with_overrides(
        self,
        *,
        select: Iterable[str] | None = None,
        ignore: Iterable[str] | None = None,
        extend_select: Iterable[str] | None = None,
        target_version: tuple[int, int] | None = None,
        target_runtime: str | None = None,
        unsafe_fixes: bool | None = None,
        extend_exclude: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        cwd: str | None = None,
    ) -> Settings:
        """These settings with the command line's options on top: ``--select`` replaces
        the file's selection, ``--ignore``/``--extend-select`` adjust it; ``--exclude``
        replaces the file's ``exclude`` (its ``extend-exclude`` stays), as ruff's."""
        changes: dict[str, Any] = {}
        if select is not None or ignore or extend_select:
            layer = (tuple(select) if select is not None else None, tuple(extend_select or ()), tuple(ignore or ()))
            changes["overrides"] = (*self.overrides, layer)
        if target_version is not None:
            changes["target_version"] = target_version
        if target_runtime is not None:
            changes["target_runtime"] = target_runtime
        if unsafe_fixes is not None:
            changes["unsafe_fixes"] = unsafe_fixes
        if exclude:
            changes["exclude"] = ()
        if extend_exclude or exclude:
            changes["command_line_exclude"] = (*self.command_line_exclude, *(exclude or ()), *(extend_exclude or ()))
            changes["command_line_root"] = cwd
        return replace(self, **changes)


class PathNames:
    """The names a glob is matched against, worked out once per path: the file name, the
    absolute path (links resolved), the path relative to the config's folder (or as
    given), and each folder on the way."""

    def __init__(self, path: str, root: str | None):
        candidate = Path(path).resolve()
        self.whole = [candidate.name, candidate.as_posix()]
        if root:
            if candidate.is_relative_to(_resolved(root)):
                self.whole.append(candidate.relative_to(_resolved(root)).as_posix())
        else:
            self.whole.append(Path(path).as_posix())
        self.parts = candidate.parts


@functools.lru_cache(maxsize=64)
def _resolved(root: str) -> Path:
    return Path(root).resolve()


class GlobSet:
    """Globs as ``fnmatch`` reads them (``*`` crosses ``/`` too), compiled into one
    pattern once: a glob matches a path when it matches one of its names, or a folder
    the path is in."""

    def __init__(self, globs: tuple[str, ...]):
        import fnmatch  # only a config with globs pays for it
        import re

        self.whole = re.compile("|".join(fnmatch.translate(g) + "|" + fnmatch.translate(f"{g}/*") for g in globs))
        self.part = re.compile("|".join(fnmatch.translate(g) for g in globs))

    def matches(self, names: PathNames) -> bool:
        return any(self.whole.match(name) for name in names.whole) or any(self.part.match(part) for part in names.parts)


@functools.lru_cache(maxsize=256)
def _globs(globs: tuple[str, ...]) -> GlobSet:
    return GlobSet(globs)


def _resolve(codes: list[str], entries: list[tuple[str, Any]]) -> dict[str, Any]:
    """Code -> the value of the most specific selector that matches it; of two as
    specific, the later entry wins."""
    decided: dict[str, Any] = {}
    for _, (selector, value) in sorted(enumerate(entries), key=lambda item: (_specificity(item[1][0]), item[0])):
        for code in codes:
            if _matches_any(code, (selector,)):
                decided[code] = value
    return decided


def _specificity(selector: str) -> int:
    return -1 if selector == "ALL" else len(selector)


def _matches_any(code: str, selectors: Iterable[str]) -> bool:
    return any(sel == "ALL" or code.startswith(sel) for sel in selectors)


# The torch_xla releases there are: 1.5 .. 1.13, then 2.0 .. 2.9 (the newest).
OLDEST_TARGET = (1, 5)
NEWEST_MINOR = {1: 13, 2: DEFAULT_TARGET[1]}


def parse_target_runtime(value: object, key: str = "target-runtime") -> str:
    """``"torch-xla"`` or ``"torch-tpu"``: the backend the port writes for."""
    if value in TARGET_RUNTIMES:
        return str(value)
    choices = " or ".join(f'"{name}"' for name in TARGET_RUNTIMES)
    near = did_you_mean(value, TARGET_RUNTIMES, cutoff=0.5) if isinstance(value, str) else ""
    raise ConfigError(f"`{key}` must be {choices}, got {value!r}{near}")


def parse_target_version(value: object, key: str = "target-version") -> tuple[int, int]:
    """``"2.9"`` (or ``"2.9.0"``) as ``(2, 9)``, for a torch_xla release that exists."""
    expected = (
        f'a torch_xla release from "{OLDEST_TARGET[0]}.{OLDEST_TARGET[1]}" to "{DEFAULT_TARGET[0]}.{DEFAULT_TARGET[1]}"'
    )
    if not isinstance(value, str):
        hint = " (quote it: a TOML number loses digits, 2.10 reads as 2.1)" if isinstance(value, float) else ""
        raise ConfigError(f"`{key}` must be a string, {expected}; got {value!r}{hint}")
    parts = value.strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(part.isdigit() and part.isascii() for part in parts):
        raise ConfigError(f'`{key}` must look like "2.9" ({expected}); got {value!r}')
    major, minor = int(parts[0]), int(parts[1])
    if (major, minor) < OLDEST_TARGET or minor > NEWEST_MINOR.get(major, -1):
        raise ConfigError(f"`{key}` must be {expected}; got {value!r}")
    return major, minor


def validate_selectors(selectors: Iterable[str], known_codes: Iterable[str], what: str) -> None:
    known = [*list(known_codes), "XLA000"]
    for sel in selectors:
        if sel == "ALL":
            continue
        if not sel.strip():
            # It would select every code (each starts with ""), as no user means.
            raise ConfigError(f"{what}: an empty rule selector (write `ALL` for every rule)")
        if not any(code.startswith(sel) for code in known):
            raise ConfigError(f"{what}: {unknown_rule('unknown rule selector', sel, known)}")


def settings_from_table(
    table: object, source: str, root: str | None, known_rules: Mapping[str, DeclaresOptions]
) -> Settings:
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: the xlalint settings must be a table, got {_kind(table)}")
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key `{unknown[0]}` in xlalint settings{did_you_mean(unknown[0], KNOWN_KEYS)}"
        )

    def codes(key: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: `{key}` must be a list of strings, got {_kind(value)}")
        return tuple(value)

    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{source}: `per-file-ignores` must be a table of glob = [codes], got {_kind(per_file)}")
    per_file_ignores = tuple((glob, codes(f'per-file-ignores."{glob}"', value)) for glob, value in per_file.items())
    rules = table.get("rules", {})
    if not isinstance(rules, dict):
        raise ConfigError(f"{source}: `rules` must be a table of [rules.CODE] tables, got {_kind(rules)}")
    for code, options in rules.items():
        if not isinstance(options, dict):
            raise ConfigError(f"{source}: `rules.{code}` must be a table of options, got {_kind(options)}")
    unsafe_fixes = table.get("unsafe-fixes")
    if unsafe_fixes is not None and not isinstance(unsafe_fixes, bool):
        raise ConfigError(f"{source}: `unsafe-fixes` must be true or false, got {_kind(unsafe_fixes)}")
    follow_imports = table.get("follow-imports", True)
    if not isinstance(follow_imports, bool):
        raise ConfigError(f"{source}: `follow-imports` must be true or false, got {_kind(follow_imports)}")
    settings = Settings(
        # `select = []` selects nothing (as in ruff); only a missing `select` means ALL.
        select=codes("select", table["select"]) if "select" in table else ("ALL",),
        ignore=codes("ignore", table.get("ignore", [])),
        extend_select=codes("extend-select", table.get("extend-select", [])),
        exclude=codes("exclude", table.get("exclude", [])),
        extend_exclude=codes("extend-exclude", table.get("extend-exclude", [])),
        unsafe_fixes=unsafe_fixes,
        fixable=codes("fixable", table.get("fixable", ["ALL"])),
        unfixable=codes("unfixable", table.get("unfixable", [])),
        extend_safe_fixes=codes("extend-safe-fixes", table.get("extend-safe-fixes", [])),
        extend_unsafe_fixes=codes("extend-unsafe-fixes", table.get("extend-unsafe-fixes", [])),
        per_file_ignores=per_file_ignores,
        target_version=_target_version(table, source),
        target_runtime=_target_runtime(table, source),
        follow_imports=follow_imports,
        rule_settings=tuple((code, tuple(opts.items())) for code, opts in rules.items()),
        root=root,
        source=source,
    )
    _validate_rule_tables(settings, source, known_rules)
    return settings


def _target_version(table: dict[str, Any], source: str) -> tuple[int, int]:
    if "target-version" not in table:
        return DEFAULT_TARGET
    try:
        return parse_target_version(table["target-version"])
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _target_runtime(table: dict[str, Any], source: str) -> str:
    if "target-runtime" not in table:
        return DEFAULT_RUNTIME
    try:
        return parse_target_runtime(table["target-runtime"])
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _kind(value: object) -> str:
    """How TOML would call ``value``'s type, for an error message."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}
    return f"{names.get(type(value), type(value).__name__)} ({value!r})"[:120]


def _validate_rule_tables(settings: Settings, source: str, known: Mapping[str, DeclaresOptions]) -> None:
    for code, _ in settings.rule_settings:
        if code not in known:
            raise ConfigError(f"{source}: [rules]: {unknown_rule('unknown rule', code, known, prefixes=False)}")
        try:
            settings.rule_options(code, known[code].options)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        except ValueError as exc:
            raise ConfigError(f"{source}: rules.{code}: {exc}") from None
    for sel_key, selectors in (
        ("select", settings.select),
        ("ignore", settings.ignore),
        ("extend-select", settings.extend_select),
        *((key, getattr(settings, key.replace("-", "_"))) for key in FIX_SELECTOR_KEYS),
        *((f'per-file-ignores."{glob}"', codes) for glob, codes in settings.per_file_ignores),
    ):
        validate_selectors(selectors, known, f"{source}: {sel_key}")


def load_file(
    path: Path, rules: Mapping[str, DeclaresOptions], inline: Mapping[str, Any] | None = None
) -> Settings | None:
    """Settings from one config file, checked against the known ``rules``, with the
    command line's ``--config KEY=VALUE`` (``inline``) on top; None for a pyproject.toml
    without xlalint."""
    import tomllib  # only a run that finds a config file pays for the TOML parser

    try:
        with open(path, "rb") as handle:
            raw = handle.read(CONFIG_MAX_BYTES + 1)
        if len(raw) > CONFIG_MAX_BYTES:
            raise ConfigError(f"{path}: too large for a config file (over {CONFIG_MAX_BYTES / 2**20:g} MiB): not read")
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    tool = data.get("tool", {})
    if path.name == "pyproject.toml":
        if not isinstance(tool, dict):
            raise ConfigError(f"{path}: `tool` must be a table, got {_kind(tool)}")
        table = tool.get("xlalint")
        if table is None:
            return None
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: `tool.xlalint` must be a table, got {_kind(table)}")
    elif set(data) == {"tool"}:
        if not isinstance(tool, dict):
            raise ConfigError(f"{path}: `tool` must be a table, got {_kind(tool)}")
        table = tool.get("xlalint", data)
    else:
        table = data
    return settings_from_table(merged(table, inline or {}), str(path), str(path.parent.resolve()), rules)


def merged(table: Mapping[str, Any], inline: Mapping[str, Any]) -> dict[str, Any]:
    """``table`` with ``inline``'s keys on top, tables merged key by key (``--config
    'rules.XLA101.max-length = 3'`` keeps the file's other rule options), as ruff does."""
    out = dict(table)
    for key, value in inline.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


INLINE_SOURCE = "--config"


def command_line_config(values: Iterable[str] | None) -> tuple[Path | None, dict[str, Any]]:
    """``--config`` as ruff reads it: a value naming a file is the config file (one at
    most); any other is a TOML ``KEY = VALUE`` of the settings, applied on top of every
    config file found (``--config 'select = ["XLA1"]'``)."""
    import tomllib

    path: Path | None = None
    inline: dict[str, Any] = {}
    for value in values or ():
        if "=" not in value or Path(value).is_file():
            if path is not None:
                raise ConfigError(f"{INLINE_SOURCE}: one config file at most (`{path}` and `{value}`)")
            path = Path(value)
            continue
        try:
            parsed = tomllib.loads(value)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"{INLINE_SOURCE} `{value}`: neither a file nor a TOML `KEY = VALUE` ({exc}); "
                "e.g. --config 'select = [\"XLA1\"]'"
            ) from None
        inline = merged(inline, parsed)
    return path, inline


def _exists(path: Path, test) -> bool:
    """``test(path)`` (is_file, is_dir), False for a path that cannot be looked at (a
    folder we may not enter, a path over PATH_MAX): the file under it says it cannot be read."""
    try:
        return test(path)
    except OSError:
        return False


@dataclass
class ConfigFinder:
    """Finds (and caches per folder) the settings that apply to a path, checking rule
    codes and options against ``rules`` (code -> rule, e.g. ``rules_by_code()``)."""

    explicit: Path | None
    rules: Mapping[str, DeclaresOptions]
    #: ``--config KEY=VALUE``: settings on top of every config file's (or of none).
    inline: Mapping[str, Any] = field(default_factory=dict)
    #: ``--isolated``: no config file is read, only ``inline`` and the defaults.
    isolated: bool = False
    _by_dir: dict[Path, Settings] = field(default_factory=dict)
    _by_given: dict[Path, Settings] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.isolated and self.explicit is not None:
            raise ConfigError(f"--isolated reads no config file: not with --config {self.explicit}")
        if self.inline:  # said as the command line's, before any file's name is put on it
            settings_from_table(self.inline, INLINE_SOURCE, None, self.rules)

    def _defaults(self) -> Settings:
        """No config file: the defaults, with ``--config KEY=VALUE`` on top."""
        if not self.inline:
            return Settings()
        return replace(settings_from_table(self.inline, INLINE_SOURCE, None, self.rules), source=None)

    def for_path(self, path: Path) -> Settings:
        if self.isolated:
            key = Path("<isolated>")
            if key not in self._by_dir:
                self._by_dir[key] = self._defaults()
            return self._by_dir[key]
        if self.explicit is not None:
            return self._explicit_settings()
        folder = path if _exists(path, Path.is_dir) else path.parent
        if folder not in self._by_given:  # a walk asks once per file: resolve once per folder
            self._by_given[folder] = self._for_dir(folder.resolve())
        return self._by_given[folder]

    def _explicit_settings(self) -> Settings:
        key = Path("<explicit>")
        if key not in self._by_dir:
            assert self.explicit is not None
            if not self.explicit.is_file():
                raise ConfigError(f"{self.explicit}: {_not_a_config_file(self.explicit)}")
            self._by_dir[key] = load_file(self.explicit, self.rules, self.inline) or replace(
                self._defaults(), source=str(self.explicit)
            )
        return self._by_dir[key]

    def _for_dir(self, folder: Path) -> Settings:
        """The settings of the nearest config file at or above ``folder`` (a loop, not
        recursion: a path can have thousands of folders)."""
        settings, passed = None, []
        for current in (folder, *folder.parents):
            if current in self._by_dir:
                settings = self._by_dir[current]
                break
            passed.append(current)
            for name in ("xlalint.toml", "pyproject.toml"):
                candidate = current / name
                if _exists(candidate, Path.is_file):
                    settings = load_file(candidate, self.rules, self.inline)
                    if settings is not None:
                        break
            if settings is not None:
                break
        settings = settings or self._defaults()
        for current in passed:
            self._by_dir[current] = settings
        return settings


def _not_a_config_file(path: Path) -> str:
    """Why ``path`` (given as ``--config``) cannot be read as a config file: missing, or
    what it is instead (a FIFO, ``/dev/zero``, a folder exist: "not found" misleads)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "config file not found"
    except OSError as error:
        return f"cannot read the config file: {error.strerror or error}"
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    what = next((name for test, name in kinds if test(mode)), "not a regular file")
    return f"{what}, not a config file (give a TOML file)"
