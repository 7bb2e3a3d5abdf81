"""Checking one module: parse once, walk once, every selected rule on the way.

``lint_source`` is a pure function of (source, path, settings, xlalint version)
and of the local modules a rule asks about (XLA502 reads the class a model is built
from in ``model.py``; ``analysis/project.py`` finds them from ``path`` and says which it
read): it keeps no state, so files can be checked in parallel, and their results are
cached when they depend on the file alone.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar

from xlalint.analysis.semantic import SCOPE_ROOTS, attach_parents
from xlalint.engine import memory, noqa
from xlalint.engine.config import Settings
from xlalint.engine.context import Context
from xlalint.engine.rule import Rule
from xlalint.engine.runtimes import TORCH_TPU, active_codes, writes_torch_xla
from xlalint.model import (
    SYNTAX_ERROR,  # noqa: F401  (its place before: the server and the fix loop import it here)
    AppendToBody,
    Finding,
    Fix,
    InsertStatement,
    MoveStatement,
    ReplaceExpr,
    Span,
    error_finding,
    split_lines,
)

# The rule about the noqa comments themselves: it reads them after the other rules.
UNUSED_NOQA = "XLA100"
# Cheap pre-filter: a file that never mentions a scope root is not parsed at all.
_MENTIONS_SCOPE = re.compile("|".join(sorted(SCOPE_ROOTS)))


# The last module parsed and its text: the runner asks what a file imports right after
# checking it (``engine/follow.py``) without parsing it again. One tuple, read once.
_last_parsed: tuple[str, ast.Module] | None = None


def forget_parsed() -> None:
    """Let the last tree go (``fix`` parses the text with libcst next: never two trees
    of a file at once)."""
    global _last_parsed
    _last_parsed = None


def parsed_tree(source: str) -> ast.Module | None:
    """The tree of ``source`` when it is the text (the same object) parsed last."""
    last = _last_parsed
    return last[1] if last is not None and last[0] is source else None


# What the module checked last tells the local modules it imports
# (``Context.iterated_imports``): its text and that, while ``recording_exports`` runs.
_exports: ContextVar[list | None] = ContextVar("xlalint_exports", default=None)


@contextlib.contextmanager
def recording_exports() -> Iterator[list]:
    """While the block runs, each check records what its module tells the local modules
    it imports, as ``[text, [(level, dotted), ...]]`` of the last text checked (the
    runner asks right after a check, so the analysis the rules built serves), or
    ``[text, None]`` when the check did not analyse it (it mentions no torch)."""
    record: list = [None, []]
    token = _exports.set(record)
    try:
        yield record
    finally:
        _exports.reset(token)


def iterated_imports(source: str, path: str, settings: Settings) -> list[tuple[int, str]]:
    """What the module ``source`` tells the local modules it imports: the functions of
    theirs whose results a step loop of it iterates (``Context.iterated_imports``),
    found without running the rules (a fixed text, the language server's document)."""
    source = source.removeprefix("\ufeff")
    if memory.over_check_limit(source) is not None:
        return []
    if not (_MENTIONS_SCOPE.search(source) or settings.iterated_by_importers):
        return []  # no step loop, and nothing told to tell on
    tree = parse(source, path)
    if isinstance(tree, Finding):
        return []
    nodes = attach_parents(tree)
    ctx = Context(source, path, tree, settings, nodes)
    try:
        return ctx.iterated_imports()
    except RecursionError:
        return []
    finally:
        ctx.release()
        for node in nodes:
            del node.parent


def parse(source: str, path: str) -> ast.Module | Finding:
    global _last_parsed
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source, filename=path)
        _last_parsed = (source, tree)
        return tree
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        return error_finding(path, f"SyntaxError: {exc.msg}", line, col)
    except (RecursionError, MemoryError):
        # CPython gives up on very deep nesting with a RecursionError, or a MemoryError
        # with no message at all.
        return error_finding(path, "cannot parse: the code is nested too deeply")
    except ValueError as exc:
        return error_finding(path, f"cannot parse: {exc}")


def selected_rules(settings: Settings, path: str | None, select: Iterable[str] | None = None) -> list[type[Rule]]:
    wanted = tuple(select) if select is not None else None
    # The selection depends on the path only through per-file-ignores: without them one
    # resolution serves every file checked with these settings.
    key = (settings, path if settings.per_file_ignores else None, wanted)
    try:
        return list(_selected_rules(*key))
    except TypeError:  # settings holding an unhashable option value (a list from the config)
        return list(_selected_rules.__wrapped__(*key))


@functools.lru_cache(maxsize=64)
def _selected_rules(settings: Settings, path: str | None, wanted: tuple[str, ...] | None) -> tuple[type[Rule], ...]:
    from xlalint.rules import rules_by_code, rules_for

    enabled = active_codes(settings, rules_by_code(), path)
    if wanted is not None:
        enabled = {code for code in enabled if any(code.startswith(s) or s == "ALL" for s in wanted)}
    return rules_for(enabled)  # only their modules are imported


def lint_source(
    source: str,
    path: str = "<stdin>",
    settings: Settings | None = None,
    *,
    select: Iterable[str] | None = None,
    rules: list[type[Rule]] | None = None,
) -> list[Finding]:
    """All findings for one module, sorted, with suppressions applied."""
    # The analysis allocates millions of short-lived objects (the tree, with parent
    # links that make it cyclic, and the analyses over it); left on, the cyclic
    # collector traverses the growing tree again and again and took 40% of the time.
    # It runs once, on the whole file's garbage, after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _lint_source(source, path, settings, select, rules)
    finally:
        if collecting:
            gc.enable()


def _lint_source(
    source: str,
    path: str,
    settings: Settings | None,
    select: Iterable[str] | None,
    rules: list[type[Rule]] | None,
) -> list[Finding]:
    settings = settings or Settings()
    exports = _exports.get()
    if exports is not None:
        exports[:] = [source, None]  # None: not analysed (no step loop in it)
    if source.startswith("\ufeff"):
        source = source[1:]  # a BOM read as text: not part of the code
    too_large = memory.over_check_limit(source)
    if too_large is not None:  # before any work: its tree would not fit the memory budget
        return [error_finding(path, too_large)]
    if not _MENTIONS_SCOPE.search(source):
        return []
    tree = parse(source, path)
    if isinstance(tree, Finding):
        return [tree]
    if noqa.file_disabled(source):
        return []
    exempt = noqa.file_exemptions(source)  # `# xlalint: noqa: XLA104` lines
    chosen = rules if rules is not None else selected_rules(settings, path, select)
    nodes: list[ast.AST] = []
    # What the check builds, let go of at the end (``Context.release``).
    contexts: list[Context] = []
    active: list[Rule] = []
    hidden: list[Rule] = []
    try:
        nodes = attach_parents(tree)
        ctx = Context(source, path, tree, settings, nodes)
        contexts.append(ctx)
        if not ctx.semantic.imports.imports_any():
            return []
        active = [rule(ctx) for rule in chosen]
        # Whether the file is ported decides what else is reported (the findings after
        # the port), whatever is selected: XLA104 runs in the same walk when it is not
        # selected, and only the selected rules' findings are reported.
        port_rule = _port_rule() if chosen and not ctx.semantic.imports.imports_module("torch_xla") else None
        port_selected = any(rule.code == PORT_CODE for rule in chosen)
        hidden = [port_rule(ctx)] if port_rule is not None and not port_selected else []
        _dispatch(nodes, active + hidden)
        if exports is not None:
            exports[1] = ctx.iterated_imports()
        reads_noqa = UNUSED_NOQA in {rule.code for rule in chosen} and noqa.may_name_codes(source, noqa.OWN_CODE_PREFIX)
        if not reads_noqa and not any(rule.findings for rule in active + hidden):
            return []  # most files: no need to tokenize them for noqa comments
        suppressions = noqa.Suppressions(source)
        findings, port_findings = (
            [finding for rule in group for finding in rule.findings if not suppressions.suppresses(finding)]
            for group in (active, hidden)
        )
        if port_rule is not None and _ports(findings + port_findings):
            ported = ctx.ported()
            contexts.append(ported)
            findings += [
                # Not porting (XLA104 not selected), a fix written for the ported code is not offered.
                finding if port_selected else dataclasses.replace(finding, fix=None)
                for finding in _after_port(ported, nodes, chosen, findings + port_findings)
                if not suppressions.suppresses(finding)
            ]
        if reads_noqa:
            # As ruff's RUF100: which noqa comment hid nothing is known once every other
            # rule's findings went through them.
            enabled = frozenset(rule.code for rule in chosen)
            for rule in active:
                before = len(rule.findings)
                rule.after_suppression(suppressions, enabled)
                findings += rule.findings[before:]
    except RecursionError:
        # Code that parses but is too deep for the analysis is reported, not a crash.
        return [error_finding(path, "cannot check: the code is nested too deeply")]
    finally:
        # Without its parent links, and with the cycles through the context and the
        # rules cut, the tree is freed as soon as the check returns.
        for rule in active + hidden:
            rule.release()
        for made in contexts:
            made.release()
        for node in nodes:
            del node.parent
    if exempt:
        findings = [finding for finding in findings if finding.code not in exempt]
    if any(finding.fix is not None for finding in findings):
        findings = _applicable_fixes(_controlled_fixes(findings, settings), source)
    return sorted(set(findings), key=Finding.sort_key)


# --- findings that follow from the port ------------------------------------------------
# The fix loop re-checks the fixed code: once XLA104's fixes import torch_xla, the rules
# of XLA scripts (XLA201's `xm.save`, XLA301's `drop_last`...) report what they did not
# before. `check` shows those too, so that the user reviews every change `fix` makes.
PORT_CODE = "XLA104"


@functools.cache
def _port_rule() -> type[Rule]:
    from xlalint.rules import rules_by_code

    return rules_by_code()[PORT_CODE]


def _imports_torch_xla(fix: Fix | None) -> bool:
    return fix is not None and any(imp.module.split(".")[0] == "torch_xla" for imp in fix.imports)


def _ports(findings: list[Finding]) -> bool:
    """The file has XLA104 findings and its fixes make it an XLA script."""
    return any(f.code == PORT_CODE for f in findings) and any(_imports_torch_xla(f.fix) for f in findings)


def _after_port(
    ported: Context, nodes: list[ast.AST], chosen: list[type[Rule]], findings: list[Finding]
) -> list[Finding]:
    """The findings the rules make once the file imports torch_xla, that they do not
    make now, marked ``after_port``. The rules run again on ``ported``
    (``Context.ported``: torch_xla taken as imported, the fact that makes a file an XLA
    script); a finding on code the port
    rewrites is left out (that code will not be there), and its fix is unsafe when the
    port is: it belongs with the port."""
    active = [rule(ported) for rule in chosen if rule.code != PORT_CODE and not rule.same_after_port]
    try:
        _dispatch(nodes, active)
        return _new_after_port(active, findings)
    finally:
        for rule in active:
            rule.release()


def _new_after_port(active: list[Rule], findings: list[Finding]) -> list[Finding]:
    """The findings of ``active`` (the rules run again on the ported module) that the
    port does not rewrite and that ``findings`` (made before the port) do not hold."""
    known = {(f.code, f.span) for f in findings}
    porting = [f.fix for f in findings if f.fix is not None and (f.code == PORT_CODE or _imports_torch_xla(f.fix))]
    rewritten = [op.span for fix in porting for op in fix.operations]
    port_is_safe = any(fix.applicability == "safe" and _imports_torch_xla(fix) for fix in porting)
    found = []
    for rule in active:
        for finding in rule.findings:
            if (finding.code, finding.span) in known or any(_rewrites(span, finding.span) for span in rewritten):
                continue
            fix = finding.fix
            if fix is not None and not port_is_safe and fix.applicability == "safe":
                fix = dataclasses.replace(fix, applicability="unsafe")
            found.append(dataclasses.replace(finding, fix=fix, after_port=True))
    return found


def _rewrites(rewritten: Span, reported: Span) -> bool:
    """The port rewrites the code reported (or part of it, not only code within it:
    `torch.save({"scaler": scaler.state_dict()}, p)` is still a `torch.save` after)."""
    return rewritten.contains(reported) or (reported.overlaps(rewritten) and not reported.contains(rewritten))


def _controlled_fixes(findings: list[Finding], settings: Settings) -> list[Finding]:
    """The fix controls of the settings, as ruff's: a rule that is not ``fixable`` (or
    is ``unfixable``) offers no fix, and ``extend-safe-fixes``/``extend-unsafe-fixes``
    say how safe its fix is. A fix that follows from an unsafe port stays unsafe: it
    belongs with the port."""
    policy = settings.fix_policy({f.code for f in findings if f.fix is not None})
    out = []
    for finding in findings:
        fix = finding.fix
        if fix is not None:
            forced = policy[finding.code]
            if forced is None or (settings.target_runtime == TORCH_TPU and writes_torch_xla(fix)):
                # A port to TorchTPU never writes torch_xla (a step closure, `xm.save`).
                finding = dataclasses.replace(finding, fix=None)
            elif settings.target_runtime == TORCH_TPU and fix.applicability != "unsafe":
                # No TorchTPU fix has run on a TPU here: each is unsafe until one has.
                finding = dataclasses.replace(finding, fix=dataclasses.replace(fix, applicability="unsafe"))
            elif forced and forced != fix.applicability and not (finding.after_port and forced == "safe"):
                finding = dataclasses.replace(finding, fix=dataclasses.replace(fix, applicability=forced))
        out.append(finding)
    return out


def _applicable_fixes(findings: list[Finding], source: str) -> list[Finding]:
    """Findings whose fix cannot be carried out lose it: a fix is offered (``[*]``,
    JSON ``fix``) only when it applies. Checked on `ast` by the rules the applier
    follows, so the check path needs no libcst: each target lies in the file, and the
    code a fix writes parses where it goes (an expression taken from a multi-line
    chain parses inside brackets, as the applier puts it)."""
    lines = split_lines(source)
    verdicts: dict[Fix, bool] = {}
    parses: dict[tuple[str, str], bool] = {}  # the same code written by many fixes is parsed once
    out = []
    for finding in findings:
        fix = finding.fix
        if fix is not None:
            applies = verdicts.get(fix)  # a fix's hash walks all of it: taken once
            if applies is None:
                applies = verdicts[fix] = _fix_applies(fix, lines, parses)
            if not applies:
                finding = dataclasses.replace(finding, fix=None)
        out.append(finding)
    return out


def _fix_applies(fix: Fix, lines: list[str], parses: dict[tuple[str, str], bool] | None = None) -> bool:
    parses = {} if parses is None else parses
    if not fix.operations:
        return False
    for op in fix.operations:
        spans = [op.span, *(span for _, span in getattr(op, "parts", ()))]
        if isinstance(op, MoveStatement):
            spans.append(op.anchor)
        if not all(_in_file(span, lines) for span in spans):
            return False
        try:
            if isinstance(op, ReplaceExpr):
                code, mode = f"(\n{_render(op.template, op.parts, lines)}\n)", "eval"
            elif isinstance(op, (InsertStatement, AppendToBody)):
                code, mode = _render(op.code, getattr(op, "parts", ()), lines), "exec"
            else:
                continue
        except (ValueError, KeyError, IndexError):
            return False
        if (code, mode) not in parses:
            parses[code, mode] = _parses(code, mode)
        if not parses[code, mode]:
            return False
    return True


def _parses(code: str, mode: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            ast.parse(code, mode=mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _in_file(span: Span, lines: list[str]) -> bool:
    return 1 <= span.line <= span.end_line <= max(len(lines), 1) and (
        span.line < span.end_line or span.col <= span.end_col
    )


def _render(template: str, parts: tuple[tuple[str, Span], ...], lines: list[str]) -> str:
    if not parts:
        return template.replace("{{", "{").replace("}}", "}")
    return template.format(**{name: _text(span, lines).strip() for name, span in parts})


def _text(span: Span, lines: list[str]) -> str:
    if span.line == span.end_line:
        return lines[span.line - 1][span.col : span.end_col]
    middle = lines[span.line : span.end_line - 1]
    return "\n".join([lines[span.line - 1][span.col :], *middle, lines[span.end_line - 1][: span.end_col]])


@functools.cache
def _visitors(rule: type[Rule]) -> tuple[tuple[type, str], ...]:
    """The node types a rule class visits, and its method for each."""
    found = []
    for attr in dir(rule):
        if attr.startswith("visit_"):
            node_type = getattr(ast, attr[len("visit_") :], None)
            if isinstance(node_type, type):
                found.append((node_type, attr))
    return tuple(found)


def _dispatch(nodes: list[ast.AST], rules: list[Rule]) -> None:
    """The one walk: each node, in source order, to every rule that visits its type."""
    for rule in rules:
        rule.begin()
    dispatch: dict[type, list[Callable[[ast.AST], None]]] = defaultdict(list)
    for rule in rules:
        for node_type, attr in _visitors(type(rule)):
            if node_type not in rule.skipped_visits:
                dispatch[node_type].append(getattr(rule, attr))
    if dispatch:
        for node in nodes:
            visitors = dispatch.get(type(node))
            if visitors:
                for visit in visitors:
                    visit(node)
    for rule in rules:
        rule.finish()
