"""torch_xla names that were deprecated or removed: when, and what replaces them.

``API_CHANGES`` is the one table XLA401 (deprecated-api) and XLA402 (removed-api)
read: supporting a new torch_xla release is an edit of this table, not of the rules.
A row is *deprecated* for a ``target-version`` at or past ``deprecated`` and before
``removed``, and *removed* from ``removed`` on.

Facts checked against torch_xla 2.9.0 (what its source still defines, and what it
decorates with ``@deprecated``) and the torch_xla release notes and deprecation
tracking issue (pytorch/xla#8915): ``xrt_world_size``/``get_ordinal``/
``parse_xla_device`` warned from 2.5 ("will be removed in release 2.7") and are gone
in 2.7; ``xm.xla_device``/``xm.mark_step`` are ``@deprecated`` in 2.8 and 2.9;
XLA:CUDA (``PJRT_DEVICE=CUDA``, ``torch_xla.amp.GradScaler``) was deprecated in 2.8
and removed in 2.9.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, Literal

from xlalint.analysis.semantic import Semantic, ancestors, string_value
from xlalint.engine.rule import Rule
from xlalint.model import Fix, ReplaceExpr

Version = tuple[int, int]
# When a call is renamed to ``replacement`` (the replacement takes those arguments):
# "always", "no arguments" (only a call that passes none), "positional" (at most
# ``max_positional`` positional arguments and no keywords); None: never (no fix).
RenameWhen = Literal["always", "no arguments", "positional"] | None


@dataclass(frozen=True)
class ApiChange:
    #: A qualified name: a function or class (``kind="object"``), a module and its
    #: submodules (``kind="module"``), or an environment setting ``VAR=value`` (``"env"``).
    name: str
    kind: Literal["object", "module", "env"]
    deprecated: str | None
    removed: str | None
    #: The qualified name to use instead, or None when there is no drop-in replacement.
    replacement: str | None = None
    rename_when: RenameWhen = None
    max_positional: int = 0
    #: False when ``removed`` is only a bound: the name is gone in that release, but the
    #: release that dropped it was not checked.
    removed_exactly: bool = True
    #: What to do instead, for the message (when there is no drop-in replacement, or
    #: to say more than its name): a few words; the rest is the rules' explanations.
    advice: str = ""

    def status(self, target: Version) -> Literal["deprecated", "removed"] | None:
        if self.removed is not None and target >= parse_version(self.removed):
            return "removed"
        if self.deprecated is not None and target >= parse_version(self.deprecated):
            return "deprecated"
        return None

    def call_renamable(self, call: ast.Call) -> bool:
        """The call can be renamed to ``replacement`` keeping its arguments."""
        if self.replacement is None or self.rename_when is None:
            return False
        if self.rename_when == "always":
            return True
        if self.rename_when == "no arguments":
            return not call.args and not call.keywords
        return (
            len(call.args) <= self.max_positional
            and not call.keywords
            and not any(isinstance(a, ast.Starred) for a in call.args)
        )


XM = "torch_xla.core.xla_model"
# What both spellings of the XLA:CUDA device (`PJRT_DEVICE=CUDA`, `=GPU`) are told.
# (Without the plugin, run on TPU or CPU: XLA402's explanation.)
NO_BUILTIN_CUDA = "it needs a PJRT CUDA plugin (e.g. xla-cuda12-pjrt)"

API_CHANGES: tuple[ApiChange, ...] = (
    # -- deprecated, still present in 2.9 --------------------------------------------------
    ApiChange(
        f"{XM}.xla_device",
        "object",
        deprecated="2.8",
        removed=None,
        replacement="torch_xla.device",
        # xla_device(n=None, devkind=None) -> device(index=None): `devkind` has no counterpart.
        rename_when="positional",
        max_positional=1,
    ),
    ApiChange(
        f"{XM}.mark_step",
        "object",
        deprecated="2.8",
        removed=None,
        replacement="torch_xla.sync",
        # mark_step(wait=False, reset_scope=True) and sync(wait=False, reset_scope=True).
        rename_when="always",
    ),
    # -- removed in 2.7 (deprecated in 2.5) -------------------------------------------------
    ApiChange(
        f"{XM}.xrt_world_size",
        "object",
        deprecated="2.5",
        removed="2.7",
        replacement="torch_xla.runtime.world_size",
        # xrt_world_size(defval=1): world_size() takes no default.
        rename_when="no arguments",
    ),
    ApiChange(
        f"{XM}.get_ordinal",
        "object",
        deprecated="2.5",
        removed="2.7",
        replacement="torch_xla.runtime.global_ordinal",
        rename_when="no arguments",
    ),
    ApiChange(
        f"{XM}.parse_xla_device",
        "object",
        deprecated="2.5",
        removed="2.7",
        advice="`torch.device(name).index` gives the ordinal",
    ),
    # -- XLA:CUDA, removed in 2.9 (deprecated in 2.8) ---------------------------------------
    ApiChange(
        "torch_xla.amp.GradScaler",
        "object",
        deprecated="2.8",
        removed="2.9",
        advice="autocast to bfloat16, which needs no loss scaling",
    ),
    ApiChange(
        "torch_xla.amp.grad_scaler",
        "module",
        deprecated="2.8",
        removed="2.9",
        advice="autocast to bfloat16, which needs no loss scaling",
    ),
    ApiChange(
        "PJRT_DEVICE=CUDA",
        "env",
        deprecated="2.8",
        removed="2.9",
        advice=NO_BUILTIN_CUDA,
    ),
    ApiChange(
        "PJRT_DEVICE=GPU",
        "env",
        deprecated="2.8",
        removed="2.9",
        advice=NO_BUILTIN_CUDA,
    ),
    # -- older moves ------------------------------------------------------------------------
    # Moved to torch_xla.runtime in 2.1 (pytorch/xla#5011, with deprecated aliases); absent
    # in 2.9.0. The release that dropped the aliases was not checked: 2.9 is the safe bound.
    ApiChange(
        "torch_xla.experimental.pjrt",
        "module",
        deprecated="2.1",
        removed="2.9",
        replacement="torch_xla.runtime",
        removed_exactly=False,
    ),
    # The pre-1.0 package, renamed to torch_xla.* in 2019 (gone by torch_xla 1.5, the first
    # release numbered after torch).
    ApiChange("torch_xla_py.xla_model", "module", None, "1.5", replacement=XM, removed_exactly=False),
    ApiChange(
        "torch_xla_py.data_parallel",
        "module",
        None,
        "1.5",
        replacement="torch_xla.distributed.data_parallel",
        removed_exactly=False,
    ),
    ApiChange("torch_xla_py.utils", "module", None, "1.5", replacement="torch_xla.utils.utils", removed_exactly=False),
    ApiChange(
        "torch_xla_py.keyd_queue",
        "module",
        None,
        "1.5",
        replacement="torch_xla.utils.keyd_queue",
        removed_exactly=False,
    ),
    ApiChange("torch_xla_py", "module", None, "1.5", replacement="torch_xla", removed_exactly=False),
)


def parse_version(text: str) -> Version:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


_OBJECTS = {change.name: change for change in API_CHANGES if change.kind == "object"}
# The last part of each tracked name: an attribute with another name cannot be one, and
# most files have thousands of attributes (checked first, before resolving imports).
_OBJECT_ATTRS = frozenset(name.rpartition(".")[2] for name in _OBJECTS)
# Longest first: `torch_xla_py.xla_model` before `torch_xla_py`.
_MODULES = sorted((c for c in API_CHANGES if c.kind == "module"), key=lambda c: -len(c.name))
_ENV: dict[tuple[str, str], ApiChange] = {
    tuple(change.name.split("=", 1)): change  # type: ignore[misc]
    for change in API_CHANGES
    if change.kind == "env"
}


def object_change(qualified: str | None) -> ApiChange | None:
    """The row of a function or class, by its qualified name."""
    return _OBJECTS.get(qualified) if qualified else None


def module_change(module: str | None) -> ApiChange | None:
    """The row of a module or a package it belongs to."""
    if not module:
        return None
    for change in _MODULES:
        if module == change.name or module.startswith(change.name + "."):
            return change
    return None


def env_change(variable: str | None, value: str | None) -> ApiChange | None:
    if variable is None or value is None:
        return None
    return _ENV.get((variable, value.upper()))


# -- finding the places a row applies to -------------------------------------------------


@dataclass(frozen=True)
class Use:
    """One place a row applies to: ``node`` is where it is reported; ``call`` is the
    call of the name (None for an import or a bare reference); ``func`` the name as
    written."""

    change: ApiChange
    node: ast.AST
    call: ast.Call | None = None
    func: ast.expr | None = None


def import_uses(node: ast.Import | ast.ImportFrom) -> list[Use]:
    """Imports of a removed or deprecated module, or of a name from one."""
    uses: list[Use] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            change = module_change(alias.name)
            if change is not None:
                uses.append(Use(change, alias))
        return uses
    if node.level or not node.module:
        return uses
    for alias in node.names:
        qualified = f"{node.module}.{alias.name}"
        change = object_change(qualified) or module_change(qualified)
        if change is not None:
            uses.append(Use(change, alias))
    whole = module_change(node.module)
    if whole is not None and all(use.change is whole for use in uses):
        # `from torch_xla_py.xla_model import a, b`: once, at the statement.
        return [Use(whole, node)]
    return uses


def reference_use(node: ast.Name | ast.Attribute, semantic: Semantic) -> Use | None:
    """A load of a tracked function or class (through any import alias), reported at
    the call when it is called."""
    if not isinstance(node.ctx, ast.Load) or (isinstance(node, ast.Attribute) and node.attr not in _OBJECT_ATTRS):
        return None
    change = object_change(semantic.qualified_name(node))
    if change is None:
        return None
    call = getattr(node, "parent", None)
    if isinstance(call, ast.Call) and call.func is node:
        return Use(change, call, call, node)
    return Use(change, node, None, node)


def _is_environ(node: ast.AST, semantic: Semantic) -> bool:
    return semantic.qualified_name(node) == "os.environ"


def env_uses(node: ast.AST, semantic: Semantic) -> list[Use]:
    """Settings of a tracked environment variable: ``os.environ["V"] = "x"``,
    ``os.environ.setdefault("V", "x")``, ``os.environ.update(V="x")``,
    ``os.putenv("V", "x")``, and ``{"V": "x"}`` (an ``env=`` for a subprocess)."""
    found: list[Use] = []
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript) and _is_environ(target.value, semantic):
                change = env_change(string_value(target.slice), string_value(node.value))
                if change is not None:
                    found.append(Use(change, node))
    elif isinstance(node, ast.Call):
        func = node.func
        setter = semantic.qualified_name(func) == "os.putenv" or (
            isinstance(func, ast.Attribute) and func.attr == "setdefault" and _is_environ(func.value, semantic)
        )
        if setter and len(node.args) == 2:
            change = env_change(string_value(node.args[0]), string_value(node.args[1]))
            if change is not None:
                found.append(Use(change, node))
        if isinstance(func, ast.Attribute) and func.attr == "update" and _is_environ(func.value, semantic):
            for kw in node.keywords:
                change = env_change(kw.arg, string_value(kw.value))
                if change is not None:
                    found.append(Use(change, kw))
    elif isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            change = env_change(string_value(key), string_value(value))
            if change is not None:
                found.append(Use(change, value))
    return found


# -- the rule logic XLA401 and XLA402 share -------------------------------------------------

# The packages of the tracked functions and classes.
TRACKED_ROOTS = frozenset({"torch_xla", "torch_xla_py"})
# Aliases the fixes prefer when they must import a replacement's module.
_PREFERRED_ALIASES = {XM: "xm", "torch_xla.runtime": "xr"}


class ApiVersionRule(Rule):
    """Reports every use of a table row whose status, for the target version, is
    ``status``. Subclasses set the code, name, documentation and ``status``."""

    status: ClassVar[Literal["deprecated", "removed"]]

    def _applies(self, change: ApiChange) -> bool:
        return change.status(self.ctx.target_version) == self.status

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for use in import_uses(node):
            # A deprecated function imports fine (its calls are reported); a removed
            # one, or a module that moved, is reported where it is imported.
            if self._applies(use.change) and (use.change.kind == "module" or self.status == "removed"):
                self._report(use)

    visit_ImportFrom = visit_Import

    def begin(self) -> None:
        # Every tracked function and class is torch_xla's, and only `os` sets variables
        # (bar a dict literal): files that import neither skip the per-name work. A name
        # is torch_xla's through an import that binds it (``Semantic.qualified_name``):
        # a file taken as importing torch_xla, as the port makes it, binds none.
        imports = self.ctx.semantic.imports
        if not any(target.split(".", 1)[0] in TRACKED_ROOTS for target in imports.bindings.values()):
            self.skipped_visits |= {ast.Name, ast.Attribute}
        if not imports.imports_any(frozenset({"os"})):
            self.skipped_visits |= {ast.Assign, ast.Call}

    def visit_Name(self, node: ast.Name | ast.Attribute) -> None:
        use = reference_use(node, self.ctx.semantic)
        if use is not None and self._applies(use.change):
            self._report(use)

    visit_Attribute = visit_Name

    def visit_Assign(self, node: ast.AST) -> None:
        for use in env_uses(node, self.ctx.semantic):
            if self._applies(use.change):
                self._report(use)

    visit_Call = visit_Dict = visit_Assign

    # -- reporting ------------------------------------------------------------------------
    def _report(self, use: Use) -> None:
        change = use.change
        if use.func is None:
            what = f"`{change.name}`"
        else:
            what = f"`{self._segment(use.func)}{'()' if use.call is not None else ''}`"
        if self.status == "removed" and change.removed_exactly:
            message = f"{what} was removed in torch_xla {change.removed}"
        elif self.status == "removed":
            message = f"{what} no longer exists (gone by torch_xla {change.removed})"
        else:
            message = f"{what} is deprecated since torch_xla {change.deprecated}"
            if change.removed is not None:
                message += f" and removed in {change.removed}"
        if change.replacement is not None:
            message += f": use `{change.replacement}`"
            if change.advice:
                message += f" ({change.advice})"
        elif change.advice:
            message += f": {change.advice}"
        fix, no_fix_reason = self._fix(use)
        if no_fix_reason:
            message += f" (no fix: {no_fix_reason})"
        self.report(use.node, message, fix=fix)

    def _fix(self, use: Use) -> tuple[Fix | None, str]:
        """The rename, or None and why there is none (empty when none is expected)."""
        change = use.change
        if use.func is None or change.replacement is None or change.rename_when is None:
            return None, ""
        if use.call is not None and not change.call_renamable(use.call):
            return None, "the replacement takes other arguments"
        if use.call is None and change.rename_when != "always":
            return None, ""  # a bare reference: the arguments of its later calls are unknown
        root = _root_name(use.func)
        if root is not None and root in self._fallback_names:
            # `except ImportError: xm = _Fallback()`: the new name would break the fallback path.
            return None, f"`{root}` is also a stand-in for a missing torch_xla"
        module, _, attr = change.replacement.rpartition(".")
        spelled, imports = self.ctx.reference(module, _PREFERRED_ALIASES.get(module))
        if imports and root is not None and root in self._guarded_imports:
            # An unconditional import added at the top would fail where the guarded one is skipped.
            return None, f"`{root}` is imported conditionally"
        new = f"{spelled}.{attr}"
        binding = self.ctx.semantic.imports.import_binding(use.func)
        return self.fix(
            "safe",
            f"Use `{new}`",
            ReplaceExpr(self.ctx.span(use.func), new),
            imports=imports,
            unused_imports=(binding,) if binding is not None else (),
        ), ""

    @cached_property
    def _fallback_names(self) -> frozenset[str]:
        """Names bound by something other than an import too (a stand-in for torch_xla
        when it is missing): ``xm = _XMFallback()``, ``class xm:``."""
        names: set[str] = set()
        semantic = self.ctx.semantic
        for node in semantic.nodes_of(ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in semantic.nodes_of(ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef):
            names.add(node.name)
        return frozenset(names)

    @cached_property
    def _guarded_imports(self) -> frozenset[str]:
        """Names bound by an import inside a ``try`` or an ``if``."""
        names: set[str] = set()
        for node in self.ctx.semantic.nodes_of(ast.Import, ast.ImportFrom):
            if any(isinstance(a, (ast.Try, ast.If)) for a in ancestors(node)):
                for alias in node.names:
                    names.add(alias.asname or alias.name.split(".", 1)[0])
        return frozenset(names)

    def _segment(self, node: ast.AST) -> str:
        span = self.ctx.span(node)
        if span.line != span.end_line:
            return self.ctx.source_of(node)
        return self.ctx.lines[span.line - 1][span.col : span.end_col]


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None
