"""The imports a fix needs, added where the user would have written them.

libcst's ``AddImportsVisitor`` knows whether an import is already there and adds the
names a ``from`` import lacks; but it appends new statements after the last import
and puts merged names first. We then move each new statement into its block in the
order ruff's isort (``I``) keeps, and sort merged names when the user's were sorted.
"""

from __future__ import annotations

import ast
import sys

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node

from xlalint.model import Import


def _import_head_length(module: cst.Module) -> int:
    """How many statements AddImportsVisitor reads, or more: the first (a docstring or
    ``__strict__`` may come before the imports), the run of imports, and the statement
    after them (which may get a blank line above)."""
    body = module.body
    end = 1
    while end < len(body) and m.matches(body[end], m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])):
        end += 1
    return min(end + 1, len(body))


def with_head_transformed(module: cst.Module, visitor: AddImportsVisitor) -> cst.Module:
    """``visitor`` run on the module's head only. AddImportsVisitor reads and changes
    nothing past the leading imports, but walks every node of the tree with matchers:
    that walk was 60% of fixing a large file."""
    length = _import_head_length(module)
    head = visitor.transform_module(module.with_changes(body=module.body[:length]))
    return module.with_changes(body=(*head.body, *module.body[length:]))


def add_imports(module: cst.Module, imports: set[Import], unused: set[Import]) -> cst.Module:
    if imports:
        context = CodemodContext()
        for imp in sorted(imports):
            if imp.name:
                AddImportsVisitor.add_needed_import(context, imp.module, imp.name, imp.asname)
            else:
                AddImportsVisitor.add_needed_import(context, imp.module, asname=imp.asname)
        module = _in_sorted_places(module, with_head_transformed(module, AddImportsVisitor(context)))
    if unused:
        unused = _unread(module, unused)
    if unused:
        module = _remove_imports(module, unused)
    return module


def _bound_name(imp: Import) -> str:
    return imp.asname or imp.name or imp.module.split(".")[0]


def _imports_one_of(statement: cst.BaseStatement, names: set[str]) -> bool:
    """``statement`` (or a block in it) binds one of ``names`` by an import."""
    for node in m.findall(statement, m.Import() | m.ImportFrom()):
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                if (alias.evaluated_alias or alias.evaluated_name).split(".")[0] in names:
                    return True
    return False


def _remove_imports(module: cst.Module, unread: set[Import]) -> cst.Module:
    """RemoveImportsVisitor, run on each top-level statement that imports one of
    ``unread`` rather than on the whole module: its scope analysis of a large file
    took most of a fix's time, and `ast` has shown that nothing reads these names."""
    names = {_bound_name(imp) for imp in unread}
    body: list[cst.BaseStatement] = []
    for statement in module.body:
        if not _imports_one_of(statement, names):
            body.append(statement)
            continue
        context = CodemodContext()
        for imp in sorted(unread):
            RemoveImportsVisitor.remove_unused_import(context, imp.module, imp.name, imp.asname)
        body.extend(RemoveImportsVisitor(context).transform_module(module.with_changes(body=[statement])).body)
    return module.with_changes(body=body)


def _unread(module: cst.Module, candidates: set[Import]) -> set[Import]:
    """The candidates whose name the fixed code no longer mentions at all. An import
    whose name is still read stays, as RemoveImportsVisitor would keep it; asking
    `ast` first spares its scope analysis of the whole file (a minute on a large one)."""
    try:
        tree = ast.parse(module.code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return candidates
    mentioned = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            mentioned.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            mentioned.add(node.value)  # `__all__ = ["GradScaler"]`
    return {imp for imp in candidates if _bound_name(imp) not in mentioned}


# --- sorted places -------------------------------------------------------------------

# isort's sections, in their order; a relative import is the project's own.
_SECTIONS = ("future", "stdlib", "third-party", "local")


def _in_sorted_places(before: cst.Module, after: cst.Module) -> cst.Module:
    """``after`` (``before`` with AddImportsVisitor's changes) with each new import
    statement moved into the block of its section, in sorted place, and the names it
    merged into a ``from`` import sorted when they were. Below the setup code of an
    exported notebook (``!pip install ...``): the imports it installs come after it."""
    length = _import_head_length(before)
    old, new = list(before.body[:length]), list(after.body[: length + len(after.body) - len(before.body)])
    rest = after.body[len(new) :]
    added = len(new) - len(old)
    old_keys, new_keys = [_statement_key(s) for s in old], [_statement_key(s) for s in new]
    start = next((i for i, (a, b) in enumerate(zip(old_keys, new_keys)) if a != b), len(old))
    if added < 0 or new_keys[start + added :] != old_keys[start:]:
        return after  # not what AddImportsVisitor does: leave its layout
    body = [_names_sorted_as_before(o, n) for o, n in zip(old, new[:start] + new[start + added :])]
    if start < len(body) and added and not any(_import_of(s) for s in old[:start]):
        # AddImportsVisitor put the imports above the first statement (setup code, not an
        # import) and set it off by a blank line: they are placed again below, it stays as it was.
        body[start] = body[start].with_changes(leading_lines=old[start].leading_lines)
    if not added:
        return after.with_changes(body=(*body, *rest))
    floor = _after_setup(before)
    if floor is not None:
        if start < len(body) and start <= floor:
            # Placed again below the setup: the statement AddImportsVisitor set off stays as it was.
            body[start] = body[start].with_changes(leading_lines=old[start].leading_lines)
        body += rest
        for statement in new[start : start + added]:
            statement = statement.with_changes(leading_lines=())
            # With the imports that directly follow the setup; else first after it (an
            # import further down may come after code that will use the new name).
            ceiling = floor
            while ceiling < len(body) and _import_of(body[ceiling]) is not None:
                ceiling += 1
            body = _placed(body, statement, floor, ceiling) or _at(body, statement, floor)
            after_run = ceiling + 1  # the statement after the imports, set off as isort does
            if after_run < len(body) and _import_of(body[after_run]) is None and not body[after_run].leading_lines:
                body[after_run] = body[after_run].with_changes(leading_lines=[cst.EmptyLine()])
        return after.with_changes(body=body)
    if not any(_import_of(s) for s in body):
        return after  # nothing to sort among: its place after the docstring stands
    for statement in new[start : start + added]:
        placed = _placed(body, statement.with_changes(leading_lines=()))
        if placed is None:
            return after
        body = placed
    return after.with_changes(body=(*body, *rest))


def _at(body: list[cst.CSTNode], statement: cst.SimpleStatementLine, index: int) -> list[cst.CSTNode]:
    """``statement`` as a block of its own before ``body[index]``, the first statement
    after the setup code: below the lines above it (a notebook's magic and cell marker
    lines are there), set off from it by a blank line."""
    if index == len(body):
        return [*body, statement.with_changes(leading_lines=[cst.EmptyLine()])]
    follower = body[index]
    return [
        *body[:index],
        statement.with_changes(leading_lines=follower.leading_lines),
        follower.with_changes(leading_lines=[cst.EmptyLine()]),
        *body[index + 1 :],
    ]


# Setup code of a notebook: IPython's lines that install (`!pip install`, `%pip`) as a
# notebook keeps them (a marker comment), IPython's lines as an export writes them
# (`get_ipython().system(...)`), and installs run from Python.
# The marker is engine/notebook.py's SETUP_MAGIC_COMMENT (that module imports the fix loop:
# importing it here would close a circle).
SETUP_MAGIC_COMMENT = "# xlalint-notebook-setup"
_SHELL_CALLS = frozenset({"os.system", "os.popen", "subprocess.run", "subprocess.call", "subprocess.check_call"})
_SHELL_CALLS |= {"subprocess.check_output", "subprocess.Popen"}
_INSTALLS = ("pip", "install", "setup")


def _after_setup(module: cst.Module) -> int | None:
    """The index of the first top-level statement after the last setup statement (None:
    there is none). Setup comes first: before the first statement that is not an
    import, a constant (`VERSION = "nightly"`) or a docstring. A magic line (a marker
    comment) stands above its statement; one further down (`!nvidia-smi` after the
    training) is not setup."""
    floor = 0 if any(_is_setup_magic(line) for line in module.header) else None
    for index, statement in enumerate(module.body):
        if any(_is_setup_magic(line) for line in statement.leading_lines):
            floor = index
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        if any(_is_setup(small) for small in statement.body):
            floor = index + 1
        elif not all(_is_preamble(small) for small in statement.body):
            break
    return floor


def _is_preamble(small: cst.BaseSmallStatement) -> bool:
    """What may come before the setup code: an import, a constant, a docstring."""
    if isinstance(small, (cst.Import, cst.ImportFrom)):
        return True
    value = getattr(small, "value", None)
    return isinstance(small, (cst.Assign, cst.Expr)) and isinstance(value, (cst.BaseString, cst.BaseNumber))


def _is_setup_magic(line: cst.EmptyLine) -> bool:
    return line.comment is not None and line.comment.value == SETUP_MAGIC_COMMENT


def _is_setup(small: cst.BaseSmallStatement) -> bool:
    """``get_ipython().system(...)`` (any IPython line), or a shell or subprocess call
    that installs (its strings name pip, an install or a setup script)."""
    value = getattr(small, "value", None)
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    calls_ipython = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call)
    if calls_ipython and get_full_name_for_node(func.value.func) == "get_ipython":
        return True
    if get_full_name_for_node(func) not in _SHELL_CALLS:
        return False
    strings = [n.evaluated_value for n in m.findall(value, m.SimpleString())]
    return any(isinstance(text, str) and any(word in text for word in _INSTALLS) for text in strings)


def _import_of(statement: cst.CSTNode) -> cst.Import | cst.ImportFrom | None:
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        node = statement.body[0]
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            return node
    return None


def _module_name(node: cst.Import | cst.ImportFrom) -> str:
    if isinstance(node, cst.Import):
        return get_full_name_for_node(node.names[0].name) or ""
    dots = "." * len(node.relative)
    return dots + (get_full_name_for_node(node.module) or "" if node.module is not None else "")


def _statement_key(statement: cst.CSTNode) -> tuple:
    """What AddImportsVisitor leaves the same in a statement it keeps: to line up the
    statements before and after it ran."""
    node = _import_of(statement)
    if isinstance(node, cst.Import):
        return ("import", tuple((get_full_name_for_node(a.name), _asname(a)) for a in node.names))
    if isinstance(node, cst.ImportFrom):
        return ("from", _module_name(node))
    return ("other", type(statement).__name__)


def _asname(alias: cst.ImportAlias) -> str:
    return get_full_name_for_node(alias.asname.name) or "" if alias.asname is not None else ""


def _section(node: cst.Import | cst.ImportFrom) -> str:
    name = _module_name(node)
    if name.startswith("."):
        return "local"
    top = name.split(".")[0]
    if top == "__future__":
        return "future"
    return "stdlib" if top in sys.stdlib_module_names else "third-party"


def _sort_key(node: cst.Import | cst.ImportFrom, by_style: bool) -> tuple:
    """ruff's order: ``import x`` before ``from x import y`` (unless the block mixes
    them: then by module only), modules case-insensitively."""
    name = _module_name(node)
    style = int(isinstance(node, cst.ImportFrom)) if by_style else 0
    asname = _asname(node.names[0]) if isinstance(node, cst.Import) else ""
    return (style, name.lower(), name, asname)


def _starts_group(statement: cst.CSTNode) -> bool:
    return any(line.comment is None for line in getattr(statement, "leading_lines", ()))


def _placed(
    body: list[cst.CSTNode], statement: cst.SimpleStatementLine, floor: int | None = None, ceiling: int | None = None
) -> list[cst.CSTNode] | None:
    """``body`` with ``statement`` (an import) among the imports of its section, in
    sorted place, among ``body[floor:ceiling]`` (below the setup code: first there, it
    goes below the lines above ``body[floor]``, which hold the setup's magic lines);
    None when there is no import it can join."""
    new = _import_of(statement)
    assert new is not None
    section = _section(new)
    start = floor or 0
    imports = [(i, node) for i, s in enumerate(body[start:ceiling], start) if (node := _import_of(s)) is not None]
    groups: list[list[tuple[int, cst.Import | cst.ImportFrom]]] = []
    for i, node in imports:
        if _section(node) != section:
            continue
        if groups and groups[-1][-1][0] == i - 1 and not _starts_group(body[i]):
            groups[-1].append((i, node))
        else:
            groups.append([(i, node)])
    if not groups:
        order = _SECTIONS.index(section)
        earlier = [i for i, node in imports if _SECTIONS.index(_section(node)) < order]
        if not earlier:
            return None
        # The first of its section: a block of its own after the sections before it.
        i = earlier[-1] + 1
        return [*body[:i], statement.with_changes(leading_lines=[cst.EmptyLine()]), *body[i:]]
    group = _group_for(groups, new)
    seen_from = False
    by_style = True
    for _, node in group:
        seen_from = seen_from or isinstance(node, cst.ImportFrom)
        by_style = by_style and not (seen_from and isinstance(node, cst.Import))
    key = _sort_key(new, by_style)
    for i, node in group:
        if _sort_key(node, by_style) > key:
            # Before it, and before the comment lines above it (they are about it); the
            # blank lines that start its block start the block still.
            lines = list(body[i].leading_lines)
            blank = next((n for n, line in enumerate(lines) if line.comment is not None), len(lines))
            if i == floor:
                blank = len(lines)  # the first after the setup: below its lines
            moved = [
                statement.with_changes(leading_lines=lines[:blank]),
                body[i].with_changes(leading_lines=lines[blank:]),
            ]
            return [*body[:i], *moved, *body[i + 1 :]]
    last = group[-1][0] + 1
    return [*body[:last], statement, *body[last:]]


def _group_for(groups: list[list[tuple[int, cst.Import | cst.ImportFrom]]], new: cst.Import | cst.ImportFrom):
    """The block (imports between blank lines) of the section that ``new`` joins: the
    one with its package (``torch_xla``), else one with its family (``torch``), else
    the first (where isort puts the section's own block before the project's)."""
    top = _top_package(new)
    for same in (lambda other: other == top, lambda other: other.split("_")[0] == top.split("_")[0]):
        for group in groups:
            if any(same(_top_package(node)) for _, node in group):
                return group
    return groups[0]


def _top_package(node: cst.Import | cst.ImportFrom) -> str:
    return _module_name(node).split(".")[0]


def _member_key(name: str) -> tuple:
    """ruff's order of the names of a ``from`` import: CONSTANTS, Classes, functions."""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, name.lower(), name)


def _names_sorted_as_before(old: cst.CSTNode, new: cst.CSTNode) -> cst.CSTNode:
    """``new``, a ``from`` import AddImportsVisitor gave more names, with those names
    put in sorted place, laid out as their neighbours, when ``old``'s names were sorted
    (and no comment sits between them); else as AddImportsVisitor wrote it."""
    before, after = _import_of(old), _import_of(new)
    if not (isinstance(before, cst.ImportFrom) and isinstance(after, cst.ImportFrom)):
        return new
    if isinstance(before.names, cst.ImportStar) or isinstance(after.names, cst.ImportStar):
        return new
    if len(after.names) == len(before.names) or m.findall(before, m.Comment()):
        return new
    aliases = list(before.names)
    keys = [_alias_key(a) for a in aliases]
    if keys != sorted(keys):
        return new
    separator = next((a.comma for a in aliases[:-1] if isinstance(a.comma, cst.Comma)), None)
    if separator is None:
        last_comma = aliases[-1].comma
        separator = (
            last_comma if isinstance(last_comma, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
    present = set(keys)
    for alias in sorted((a for a in after.names if _alias_key(a) not in present), key=_alias_key):
        i = next((n for n, other in enumerate(aliases) if _alias_key(other) > _alias_key(alias)), len(aliases))
        if i < len(aliases):
            aliases.insert(i, alias.with_changes(comma=separator))
        else:
            last = aliases[-1]
            aliases[-1] = last.with_changes(comma=separator)
            aliases.append(alias.with_changes(comma=last.comma))
    return new.with_changes(body=[after.with_changes(names=aliases, lpar=before.lpar, rpar=before.rpar)])


def _alias_key(alias: cst.ImportAlias) -> tuple:
    return (*_member_key(get_full_name_for_node(alias.name) or ""), _asname(alias))
