"""The light semantic layer over Python's `ast`: import aliases, parents, names.

It is deliberately small: flow-insensitive, one file, no type inference. That is
what keeps a check instant while still resolving ``xm.mark_step`` to
``torch_xla.core.xla_model.mark_step`` whatever the script called its imports.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from collections import ChainMap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from xlalint.model import Import

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

    def binds_any(self, roots: frozenset[str]) -> bool:
        """A name here is bound to a module (or what it holds) under one of ``roots``:
        only then can a call's qualified name start with one of them. Unlike
        ``imports_any``, not changed by the port taking torch_xla as imported."""
        return any(target.split(".", 1)[0] in roots for target in self.bindings.values())

    def alias_for(self, qualified: str, names: ScopeNames | None = None) -> str | None:
        """A local name already bound to ``qualified`` (a module or object), if any,
        and (given ``names``) not rebound to something else where the code goes."""
        for local, target in self.bindings.items():
            if target == qualified and (names is None or names.means(local, qualified)):
                return local
        return None

    def reference_object(self, qualified: str, names: ScopeNames | None = None) -> tuple[str, tuple[Import, ...]]:
        """How to write a class or function ``qualified`` (``transformers.DataCollatorWithPadding``):
        an existing binding of it or of its module, else ``from module import name``."""
        existing = self.alias_for(qualified, names)
        if existing:
            return existing, ()
        module, _, name = qualified.rpartition(".")
        module_alias = self.alias_for(module, names)
        if module_alias:
            return f"{module_alias}.{name}", ()
        if (name in self.bindings) if names is None else not names.free(name):
            # The name means something else here: spell the object out through its module.
            module_ref, imports = self.reference(module, None, names)
            return f"{module_ref}.{name}", imports
        return name, (Import(module, name=name),)

    def reference(
        self, qualified: str, preferred: str | None = None, names: ScopeNames | None = None
    ) -> tuple[str, tuple[Import, ...]]:
        """How to write ``qualified`` in code, and the import that makes it valid.

        Reuses an existing alias (``xm`` for ``torch_xla.core.xla_model``, however
        it was imported) unless the code's scope rebinds it; otherwise asks for
        ``import qualified as preferred`` (or a plain ``import qualified`` when no
        alias is preferred). When that name is already taken (by an import of
        something else, a variable, a parameter of the function the code goes in),
        the import gets a fresh alias instead: ``import torch_xla.core.xla_model as xm_1``.
        ``names``: the names bound where the code goes (``Semantic.names_at``);
        without them only imports count as taken.
        """
        existing = self.alias_for(qualified, names)
        if existing:
            return existing, ()

        def free(local: str) -> bool:
            # An import inside another function binds its name there only.
            return local not in self.bindings if names is None else names.free(local)

        if preferred is None:
            root = qualified.split(".", 1)[0]
            if self.bindings.get(root) == root and (names is None or names.means(root, root)):
                return qualified, ()
            if free(root):
                return qualified, (Import(qualified),)
            preferred = qualified.rsplit(".", 1)[-1]
        if not free(preferred):
            preferred = self.fresh_name(preferred, names)
        return preferred, (Import(qualified, asname=preferred),)

    def fresh_name(self, base: str, names: ScopeNames | None = None) -> str:
        """``base_1``, ``base_2``, ...: the first that names nothing in the file."""
        n = 1
        while f"{base}_{n}" in self.bindings if names is None else not names.fresh(f"{base}_{n}"):
            n += 1
        return f"{base}_{n}"


# Nodes that open a scope of their own.
_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)
_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
# A binding that is not an import of anything (a variable, parameter, def, class).
_OTHER = ""


class ScopeNames:
    """The names bound where a fix puts code: in the module and in the scopes around
    the node. A name maps to the qualified name it is imported as, or to ``""``
    (a variable, parameter, function or class). Built from `ast` alone.

    Without a node (``at=None``) every name bound in any function or class of the
    file counts as taken: the code could go anywhere.
    """

    def __init__(self, visible: Mapping[str, str], every_name: frozenset[str]):
        self.visible = visible
        self.every_name = every_name

    def means(self, local: str, qualified: str) -> bool:
        """``local`` is bound (by an import) to ``qualified`` where the code goes (an
        import inside another function does not count)."""
        return self.visible.get(local) == qualified

    def free(self, local: str) -> bool:
        """A new module-level import may bind ``local``: nothing binds it where the code goes."""
        return local not in self.visible

    def fresh(self, local: str) -> bool:
        """``local`` appears nowhere in the file."""
        return local not in self.visible and local not in self.every_name


def scope_bindings(scope: ast.AST) -> dict[str, str]:
    """The names a scope binds itself (not those of nested scopes): local name -> the
    qualified name an import binds it to, or ``""``. A scope's ``global`` names are
    left out (they belong to the module)."""
    bound: dict[str, str] = {}
    declared_global: set[str] = set()

    def bind(name: str, meaning: str = _OTHER) -> None:
        # A name bound both by an import and otherwise means something else somewhere.
        bound[name] = meaning if bound.get(name, meaning) == meaning else _OTHER

    if isinstance(scope, _FUNCTION_SCOPES):
        a = scope.args
        for param in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
            if param is not None:
                bind(param.arg)
        stack: list[ast.AST] = [scope.body] if isinstance(scope, ast.Lambda) else list(scope.body)
    elif isinstance(scope, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        for generator in scope.generators:
            for node in ast.walk(generator.target):
                if isinstance(node, ast.Name):
                    bind(node.id)
        return bound
    else:
        stack = list(scope.body)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name)
            # Decorators, defaults and bases run in this scope.
            stack.extend(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                stack.extend(node.bases)
            else:
                stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bind(alias.asname, alias.name)
                else:
                    root = alias.name.split(".", 1)[0]
                    bind(root, root)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    bind(alias.asname or alias.name, f"{node.module}.{alias.name}" if not node.level else _OTHER)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            if isinstance(node, ast.Global):
                declared_global.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest)
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # Their own names are theirs; only the first iterable is evaluated here.
            if not isinstance(node, ast.Lambda):
                stack.append(node.generators[0].iter)
            else:
                stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        stack.extend(child_nodes(node))
    for name in declared_global:
        bound.pop(name, None)
    return bound


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}  # filled by _child_fields
# Fields that never hold a node of the tree: CPython's shared context and operator
# instances, and (by class: 3.12's TypeAlias.name is a node) names, numbers and flags.
# Skipping them makes the walk faster.
_SHARED_FIELDS = frozenset({"ctx", "op", "ops"})
_SCALAR_FIELDS = frozenset(
    {("Name", "id"), ("Attribute", "attr"), ("arg", "arg"), ("keyword", "arg"), ("alias", "name")}
    | {("alias", "asname"), ("ImportFrom", "module"), ("ImportFrom", "level"), ("Constant", "kind")}
    | {("FunctionDef", "name"), ("AsyncFunctionDef", "name"), ("ClassDef", "name"), ("ExceptHandler", "name")}
    | {("comprehension", "is_async"), ("FormattedValue", "conversion"), ("AnnAssign", "simple")}
    | {("Constant", "value"), ("Global", "names"), ("Nonlocal", "names")}
)


def _child_fields(node_type: type) -> tuple[str, ...]:
    name = node_type.__name__
    fields = tuple(
        f
        for f in node_type._fields
        if f not in _SHARED_FIELDS and f != "type_comment" and (name, f) not in _SCALAR_FIELDS
    )
    _CHILD_FIELDS[node_type] = fields
    return fields


def attach_parents(tree: ast.AST) -> list[ast.AST]:
    """Give every node a ``parent`` attribute (None for the root); return every node
    in source (pre-)order, so later passes need not walk the tree again.

    The walk is ``ast.iter_child_nodes`` inlined (this runs over every node of every
    file checked: twice as fast), and leaves out the contexts and operators (``Load``,
    ``Add``, ``Eq``...): CPython shares one instance of each between all trees, so they
    can have no parent of their own, and one would keep the last tree alive.
    """
    tree.parent = None  # type: ignore[attr-defined]
    order: list[ast.AST] = []
    stack = [tree]
    node_type = ast.AST
    known_fields = _CHILD_FIELDS.get
    while stack:
        node = stack.pop()
        order.append(node)
        fields = known_fields(node.__class__)
        if fields is None:
            fields = _child_fields(node.__class__)
        if not fields:
            continue  # a leaf (`Name`, `Constant`...): a third of the nodes
        children = []
        for name in fields:
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, node_type):
                        item.parent = node  # type: ignore[attr-defined]
                        children.append(item)
            elif isinstance(value, node_type):
                value.parent = node  # type: ignore[attr-defined]
                children.append(value)
        if children:
            children.reverse()
            stack.extend(children)
    return order


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes`` without the shared contexts and operators, as a list:
    the same children in the same order, found as fast as ``attach_parents`` finds them."""
    fields = _CHILD_FIELDS.get(node.__class__)
    if fields is None:
        fields = _child_fields(node.__class__)
    children = []
    node_type = ast.AST
    for name in fields:
        value = getattr(node, name, None)
        if value.__class__ is list:
            for item in value:
                if isinstance(item, node_type):
                    children.append(item)
        elif isinstance(value, node_type):
            children.append(value)
    return children


def subtree(node: ast.AST, without: ast.AST | None = None) -> list[ast.AST]:
    """``node`` and every node below it (in no promised order), like ``ast.walk``
    without the shared contexts and operators; for set-like questions asked of a whole
    function, several times faster than ``ast.walk``. ``without``: a node below
    ``node`` left out, with what is below it."""
    if without is not None:
        return list(_subtree_without(node, without))
    found = [node]
    stack = [node]
    node_type = ast.AST
    known_fields = _CHILD_FIELDS.get
    while stack:
        current = stack.pop()
        fields = known_fields(current.__class__)
        if fields is None:
            fields = _child_fields(current.__class__)
        for name in fields:
            value = getattr(current, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, node_type):
                        found.append(item)
                        stack.append(item)
            elif isinstance(value, node_type):
                found.append(value)
                stack.append(value)
    return found


def _subtree_without(node: ast.AST, without: ast.AST) -> Iterator[ast.AST]:
    stack = [node]
    while stack:
        current = stack.pop()
        if current is not without:
            yield current
            stack.extend(child_nodes(current))


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


class _BoundAnywhere(Mapping):
    """Every name bound anywhere in the file, each found when it is asked about
    (``Semantic.bound_anywhere``): a fix that imports ``torch_xla`` asks about a few
    names, and reading the bindings of every function for them was a tenth of the
    check of a large file."""

    def __init__(self, semantic: Semantic, found: dict[str, str | None]):
        self._semantic = semantic
        # The semantic layer's, which does not keep this view: a cycle would hold the
        # tree until the cyclic collector traverses it (``Context.release``).
        self._found = found

    def _meaning(self, name: object) -> str | None:
        if not isinstance(name, str):
            return None
        if name not in self._found:
            self._found[name] = self._semantic.bound_anywhere(name)
        return self._found[name]

    def __getitem__(self, name: str) -> str:
        meaning = self._meaning(name)
        if meaning is None:
            raise KeyError(name)
        return meaning

    def __contains__(self, name: object) -> bool:
        return self._meaning(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._semantic._all_bound_anywhere)

    def __len__(self) -> int:
        return len(self._semantic._all_bound_anywhere)


class Semantic:
    """Name resolution for one module, and every node of it by type."""

    def __init__(self, tree: ast.Module, nodes: list[ast.AST] | None = None, told: tuple[str, ...] = ()):
        self.tree = tree
        #: What the XLA scripts that import the module tell it of its functions
        #: (``analysis/told.py``, ``Settings.iterated_by_importers``).
        self.told = told
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
        self._scope_cache: dict[int, dict[str, str]] = {}
        self._bound_anywhere: dict[str, str | None] = {}  # ``_BoundAnywhere``'s answers
        self._qualified: dict[ast.AST, str | None] = {}

    def importing(self, module: str) -> Semantic:
        """This layer as if the module also imported ``module`` (the port's torch_xla),
        without binding a name: what is imported changes, no binding does, so every
        answer found so far (qualified names, scopes, the node index) is shared."""
        other = copy.copy(self)
        other.imports = dataclasses.replace(self.imports, imported_modules={*self.imports.imported_modules, module})
        return other

    def names_at(self, node: ast.AST | None) -> ScopeNames:
        """The names bound where code at ``node`` runs (module and enclosing scopes); for
        ``None``, every name bound anywhere in the file. See :class:`ScopeNames`."""
        if node is None:
            return self._names_anywhere()
        scopes = [a for a in ancestors(node) if isinstance(a, _SCOPES)]
        # Innermost first, so inner bindings win; a class body is seen only from itself.
        # Chained, not merged: a copy of the module's names per fix made a module's
        # check quadratic in its number of functions.
        inner = [
            self._scope_bindings(s) for depth, s in enumerate(scopes) if depth == 0 or not isinstance(s, ast.ClassDef)
        ]
        return ScopeNames(ChainMap(*inner, self._module_bindings), self._every_name)

    def _names_anywhere(self) -> ScopeNames:
        if self.tree.body and parent(self.tree.body[0]) is None:  # no parent links: every scope is read
            return ScopeNames(self._all_bound_anywhere, self._every_name)
        return ScopeNames(_BoundAnywhere(self, self._bound_anywhere), self._every_name)

    @cached_property
    def _all_bound_anywhere(self) -> dict[str, str]:
        visible = dict(self._module_bindings)
        for scope in self.nodes_of(*_SCOPES):
            for name, meaning in self._scope_bindings(scope).items():
                # Bound to one module everywhere (a local `import torch_xla`) still means it.
                visible[name] = meaning if visible.get(name, meaning) == meaning else _OTHER
        return visible

    def bound_anywhere(self, name: str) -> str | None:
        """What ``name`` is bound to anywhere in the file (as ``names_at(None)`` says), or
        None where nothing binds it: the module's binding, folded with those of the scopes
        around the nodes that may bind it (the rest cannot)."""
        meaning = self._module_bindings.get(name)
        seen: set[int] = set()
        for node in self._may_bind(name):
            for scope in ancestors(node):
                if isinstance(scope, _SCOPES) and id(scope) not in seen:
                    seen.add(id(scope))
                    bound = self._scope_bindings(scope).get(name)
                    if bound is not None:
                        meaning = bound if meaning in (None, bound) else _OTHER
        return meaning

    def _may_bind(self, name: str) -> Iterator[ast.AST]:
        """The nodes that may bind ``name`` (in the scope around them, or one further out)."""
        yield from (n for n in self.names_with_id(name) if not isinstance(n.ctx, ast.Load))
        yield from (n for n in self.nodes_of(ast.arg) if n.arg == name)
        for node in self.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler):
            if node.name == name:
                yield node
        for node in self.nodes_of(ast.MatchAs, ast.MatchStar, ast.MatchMapping):
            if name in (getattr(node, "name", None), getattr(node, "rest", None)):
                yield node
        for node in self.nodes_of(ast.Import, ast.ImportFrom):
            if any((a.asname or a.name.split(".", 1)[0]) == name for a in node.names):
                yield node

    @cached_property
    def _module_bindings(self) -> dict[str, str]:
        bound = scope_bindings(self.tree)
        for node in self.nodes_of(ast.Global):
            bound.update(dict.fromkeys(node.names, _OTHER))
        return bound

    def _scope_bindings(self, scope: ast.AST) -> dict[str, str]:
        cached = self._scope_cache.get(id(scope))
        if cached is None:
            cached = self._scope_cache[id(scope)] = scope_bindings(scope)
        return cached

    @cached_property
    def _every_name(self) -> frozenset[str]:
        """Every identifier the file binds or reads (a fresh alias must be none of them)."""
        names = {n.id for n in self.nodes_of(ast.Name)}
        names.update(n.arg for n in self.nodes_of(ast.arg))
        names.update(n.name for n in self.nodes_of(ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for node in self.nodes_of(ast.Import, ast.ImportFrom):
            names.update((a.asname or a.name).split(".", 1)[0] for a in node.names)
        return frozenset(names)

    def nodes_of(self, *types: type) -> list:
        """Every node of these exact types (source order within each type)."""
        if len(types) == 1:
            return self._by_type.get(types[0], [])
        return [node for t in types for node in self._by_type.get(t, [])]

    @property
    def calls(self) -> list[ast.Call]:
        """Every call in the module, in source order."""
        return self.nodes_of(ast.Call)

    def calls_named(self, name: str) -> list[ast.Call]:
        """The calls of ``name(...)`` or ``<anything>.name(...)`` as written (an imported
        alias is not resolved: ``values.call_sites`` asks for a local function), in
        source order."""
        return self._calls_by_called_name.get(name, [])

    def names_with_id(self, identifier: str) -> list[ast.Name]:
        """Every ``Name`` node spelled ``identifier``, in source order."""
        return self._names_by_id.get(identifier, [])

    def attributes_named(self, attr: str) -> list[ast.Attribute]:
        """Every ``<x>.attr`` node, in source order."""
        return self._attributes_by_attr.get(attr, [])

    def attribute_by_class(self, attr: str) -> AttributeByClass:
        """The ``<x>.attr`` nodes that are not attributes of an imported module (``self.stream``,
        not ``torch.cuda.stream``), by the innermost class that holds them; grouped once
        per attribute name."""
        found = self._attributes_by_class.get(attr)
        if found is None:
            nodes = [n for n in self.attributes_named(attr) if self.qualified_name(n) is None]
            found = self._attributes_by_class[attr] = AttributeByClass(nodes)
        return found

    @cached_property
    def _attributes_by_class(self) -> dict[str, AttributeByClass]:
        return {}

    @cached_property
    def _names_by_id(self) -> dict[str, list[ast.Name]]:
        # Built once per module, like the call index: a rule that asks for every use of
        # each of many variables must not rescan the module per variable.
        index: dict[str, list[ast.Name]] = {}
        for node in self.nodes_of(ast.Name):
            index.setdefault(node.id, []).append(node)
        return index

    @cached_property
    def _attributes_by_attr(self) -> dict[str, list[ast.Attribute]]:
        index: dict[str, list[ast.Attribute]] = {}
        for node in self.nodes_of(ast.Attribute):
            index.setdefault(node.attr, []).append(node)
        return index

    @cached_property
    def calls_by_function(self) -> dict[str, list[ast.Call]]:
        """Every call, by the own name of the function or method it calls however that is
        imported: ``save`` for ``torch.save(x)``, ``obj.save()``, and ``tsave(x)`` after
        ``from torch import save as tsave``."""
        bindings = self.imports.bindings
        index: dict[str, list[ast.Call]] = {}
        for call in self.calls:
            func = call.func
            if isinstance(func, ast.Attribute):
                name = func.attr
            elif isinstance(func, ast.Name):
                name = bindings.get(func.id, func.id).rsplit(".", 1)[-1]
            else:
                continue
            index.setdefault(name, []).append(call)
        return index

    def calls_of(self, *names: str) -> list[ast.Call]:
        """The calls of a function or method whose own name is one of ``names``
        (``calls_by_function``), in source order: a cheap filter before resolving
        qualified names with ``call_name``."""
        if len(names) == 1:
            return self.calls_by_function.get(names[0], [])
        found = [call for name in names for call in self.calls_by_function.get(name, [])]
        return sorted(found, key=lambda c: (c.lineno, c.col_offset))

    def method_calls(self, cls: ast.ClassDef, name: str) -> list[ast.Call]:
        """The calls ``<x>.name(...)`` whose nearest enclosing class is ``cls``, in source order."""
        return self._attribute_calls_by_class.get((id(cls), name), [])

    @cached_property
    def _attribute_calls_by_class(self) -> dict[tuple[int, str], list[ast.Call]]:
        index: dict[tuple[int, str], list[ast.Call]] = {}
        for call in self.calls:
            if isinstance(call.func, ast.Attribute):
                cls = next((a for a in ancestors(call) if isinstance(a, ast.ClassDef)), None)
                if cls is not None:
                    index.setdefault((id(cls), call.func.attr), []).append(call)
        return index

    @cached_property
    def _calls_by_called_name(self) -> dict[str, list[ast.Call]]:
        # Built once per module: asking "who calls f" of every function by scanning
        # every call would make a module's check quadratic in its size.
        index: dict[str, list[ast.Call]] = {}
        for call in self.calls:
            func = call.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name is not None:
                index.setdefault(name, []).append(call)
        return index

    def qualified_name(self, node: ast.AST) -> str | None:
        """The fully qualified name of a name/attribute chain rooted in an import.

        ``xm.mark_step`` -> ``torch_xla.core.xla_model.mark_step`` after
        ``import torch_xla.core.xla_model as xm``; None when the root is not an
        imported name.
        """
        # Memoized: several rules ask for the name of every call.
        try:
            return self._qualified[node]
        except KeyError:
            pass
        # The root first: most chains (``self.layer(...)``) start at no import, and need
        # no dotted string built.
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        target = self.imports.bindings.get(root.id) if isinstance(root, ast.Name) else None
        name = None
        if target is not None:
            rest = dotted_name(node).partition(".")[2]  # type: ignore[union-attr]
            name = f"{target}.{rest}" if rest else target
        self._qualified[node] = name
        return name

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


def keyword_value(call: ast.Call, name: str) -> ast.expr | None:
    """The value given to ``call``'s keyword ``name``, if any."""
    kw = keyword(call, name)
    return kw.value if kw is not None else None


def string_value(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


class AttributeByClass:
    """The uses of one attribute name, by the innermost class each is in (None: outside
    every class), in source order: a class asks which are its own and where the first
    use outside it is, at a cost that does not grow with the other classes."""

    def __init__(self, nodes: list[ast.Attribute]) -> None:
        self._by_class: dict[int, list[ast.Attribute]] = {}
        self._first: tuple[ast.Attribute, ast.ClassDef | None] | None = None
        self._first_elsewhere: ast.Attribute | None = None  # the first in another class than the first's
        for node in nodes:
            cls = next((a for a in ancestors(node) if isinstance(a, ast.ClassDef)), None)
            self._by_class.setdefault(id(cls), []).append(node)
            if self._first is None:
                self._first = (node, cls)
            elif self._first_elsewhere is None and cls is not self._first[1]:
                self._first_elsewhere = node

    def in_class(self, cls: ast.ClassDef) -> list[ast.Attribute]:
        """The uses in ``cls`` itself (not in a class nested in it)."""
        return self._by_class.get(id(cls), [])

    def first_outside(self, cls: ast.ClassDef) -> ast.Attribute | None:
        """The first use, in source order, that is not in ``cls`` itself."""
        if self._first is None:
            return None
        return self._first[0] if self._first[1] is not cls else self._first_elsewhere
