"""The light semantic layer over Python's `ast`: import aliases, parents, names.

It is deliberately small: flow-insensitive, one file, no type inference. That is
what keeps a check instant while still resolving ``xm.mark_step`` to
``torch_xla.core.xla_model.mark_step`` whatever the script called its imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from xlalint.linter.model import Import

# The roots that put a file in scope (docs/rules.md, "Scope").
SCOPE_ROOTS = frozenset({"torch", "torch_xla", "transformers", "tokenizers", "accelerate"})


@dataclass
class ImportTable:
    """Local name -> the fully qualified name it is bound to by an import."""

    bindings: dict[str, str] = field(default_factory=dict)
    imported_modules: set[str] = field(default_factory=set)
    # Local name -> the `from module import name [as local]` that bound it.
    from_imports: dict[str, Import] = field(default_factory=dict)

    @classmethod
    def build(cls, tree: ast.Module, nodes: list[ast.AST] | None = None) -> ImportTable:
        table = cls()
        for node in nodes if nodes is not None else ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    table.imported_modules.add(alias.name)
                    if alias.asname:
                        table.bindings[alias.asname] = alias.name
                    else:
                        # `import a.b.c` binds `a` to the package `a`.
                        root = alias.name.split(".", 1)[0]
                        table.bindings[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                table.imported_modules.add(node.module)
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    local = alias.asname or alias.name
                    table.bindings[local] = f"{node.module}.{alias.name}"
                    table.from_imports[local] = Import(node.module, alias.name, alias.asname)
        return table

    def import_binding(self, node: ast.AST) -> Import | None:
        """The ``from ... import`` that bound the name ``node`` (to remove it once unused)."""
        if isinstance(node, ast.Name):
            return self.from_imports.get(node.id)
        return None

    def imports_any(self, roots: frozenset[str] = SCOPE_ROOTS) -> bool:
        return any(module.split(".", 1)[0] in roots for module in self.imported_modules)

    def imports_module(self, prefix: str) -> bool:
        return any(m == prefix or m.startswith(prefix + ".") for m in self.imported_modules)

    def alias_for(self, qualified: str) -> str | None:
        """A local name already bound to ``qualified`` (a module or object), if any."""
        for local, target in self.bindings.items():
            if target == qualified:
                return local
        return None

    def reference_object(self, qualified: str) -> tuple[str, tuple[Import, ...]]:
        """How to write a class or function ``qualified`` (``transformers.DataCollatorWithPadding``):
        an existing binding of it or of its module, else ``from module import name``."""
        existing = self.alias_for(qualified)
        if existing:
            return existing, ()
        module, _, name = qualified.rpartition(".")
        module_alias = self.alias_for(module)
        if module_alias:
            return f"{module_alias}.{name}", ()
        if name in self.bindings:
            # The name means something else here: spell the object out through its module.
            return qualified, (Import(module),)
        return name, (Import(module, name=name),)

    def reference(self, qualified: str, preferred: str | None = None) -> tuple[str, tuple[Import, ...]]:
        """How to write ``qualified`` in code, and the import that makes it valid.

        Reuses an existing alias (``xm`` for ``torch_xla.core.xla_model``, however
        it was imported); otherwise asks for ``import qualified as preferred`` (or a
        plain ``import qualified`` when no alias is preferred).
        """
        existing = self.alias_for(qualified)
        if existing:
            return existing, ()
        if preferred is None:
            root = qualified.split(".", 1)[0]
            if self.bindings.get(root) == root:
                return qualified, ()
            return qualified, (Import(qualified),)
        if preferred in self.bindings:
            # The preferred alias means something else here: spell it out in full.
            root = qualified.split(".", 1)[0]
            needs = () if self.bindings.get(root) == root else (Import(qualified),)
            return qualified, needs
        return preferred, (Import(qualified, asname=preferred),)


def attach_parents(tree: ast.AST) -> list[ast.AST]:
    """Give every node a ``parent`` attribute (None for the root); return every node
    in source (pre-)order, so later passes need not walk the tree again."""
    tree.parent = None  # type: ignore[attr-defined]
    order: list[ast.AST] = []
    stack = [tree]
    iter_children = ast.iter_child_nodes
    while stack:
        node = stack.pop()
        order.append(node)
        children = list(iter_children(node))
        for child in children:
            child.parent = node  # type: ignore[attr-defined]
        children.reverse()
        stack.extend(children)
    return order


def parent(node: ast.AST) -> ast.AST | None:
    return getattr(node, "parent", None)


def ancestors(node: ast.AST) -> Iterator[ast.AST]:
    current = parent(node)
    while current is not None:
        yield current
        current = parent(current)


def enclosing_statement(node: ast.AST) -> ast.stmt | None:
    current: ast.AST | None = node
    while current is not None and not isinstance(current, ast.stmt):
        current = parent(current)
    return current


def enclosing_function(node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for anc in ancestors(node):
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return anc
    return None


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class Semantic:
    """Name resolution for one module, and every node of it by type."""

    def __init__(self, tree: ast.Module, nodes: list[ast.AST] | None = None):
        self.tree = tree
        #: Every node in source order (from ``attach_parents``, or walked here).
        self.nodes: list[ast.AST] = nodes if nodes is not None else list(ast.walk(tree))
        self._by_type: dict[type, list[ast.AST]] = {}
        for node in self.nodes:
            self._by_type.setdefault(type(node), []).append(node)
        imports = sorted(self.nodes_of(ast.Import, ast.ImportFrom), key=lambda n: (n.lineno, n.col_offset))
        self.imports = ImportTable.build(tree, imports)
        self.module_functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {
            stmt.name: stmt for stmt in tree.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        }

    def nodes_of(self, *types: type) -> list:
        """Every node of these exact types (source order within each type)."""
        if len(types) == 1:
            return self._by_type.get(types[0], [])
        return [node for t in types for node in self._by_type.get(t, [])]

    @property
    def calls(self) -> list[ast.Call]:
        """Every call in the module, in source order."""
        return self.nodes_of(ast.Call)

    def qualified_name(self, node: ast.AST) -> str | None:
        """The fully qualified name of a name/attribute chain rooted in an import.

        ``xm.mark_step`` -> ``torch_xla.core.xla_model.mark_step`` after
        ``import torch_xla.core.xla_model as xm``; None when the root is not an
        imported name.
        """
        dotted = dotted_name(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        target = self.imports.bindings.get(root)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target

    def call_name(self, call: ast.AST) -> str | None:
        """The qualified name of the function a call calls, if it is imported."""
        if not isinstance(call, ast.Call):
            return None
        return self.qualified_name(call.func)

    def is_call_to(self, node: ast.AST, *names: str) -> bool:
        qualified = self.call_name(node)
        return qualified is not None and qualified in names


def method_name(call: ast.AST) -> str | None:
    """``m`` for a call ``<anything>.m(...)``."""
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw
    return None


def string_value(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
