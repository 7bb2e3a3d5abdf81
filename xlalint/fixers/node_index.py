"""Finding the libcst node an `ast` span names: every node of a module with its span."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from xlalint.model import Span


class FixError(Exception):
    """An operation that cannot be carried out on this tree."""


class NodeIndex:
    """Every node of a module with its span, to find the node an `ast` span names.

    Positions are resolved once (one codegen pass); a lookup then descends from the
    module through the children whose span contains the target (a bisection where a
    node has many children), so a pass with many fixes stays linear in the file.
    """

    def __init__(self, wrapper: MetadataWrapper):
        self.module = wrapper.module
        positions = wrapper.resolve(PositionProvider)
        self.spans: dict[cst.CSTNode, Span] = {
            node: Span(r.start.line, r.start.column, r.end.line, r.end.column) for node, r in positions.items()
        }
        self._children: dict[int, tuple[Sequence[cst.CSTNode], list[tuple[int, int]]]] = {}
        self._parents: dict[cst.CSTNode, cst.CSTNode] | None = None
        #: The path from the module to each node found (for pruning the rewrite).
        self.paths: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}

    @classmethod
    def of(cls, module: cst.Module) -> NodeIndex:
        # The module is never changed in place, so the wrapper's deep copy is not needed.
        return cls(MetadataWrapper(module, unsafe_skip_copy=True))

    def _kids(self, node: cst.CSTNode) -> tuple[Sequence[cst.CSTNode], list[tuple[int, int]]]:
        entry = self._children.get(id(node))
        if entry is None:
            kids = [k for k in node.children if k in self.spans]
            entry = (kids, [(self.spans[k].line, self.spans[k].col) for k in kids])
            self._children[id(node)] = entry
        return entry

    def _descend(self, span: Span) -> list[cst.CSTNode]:
        """The path from the module to the deepest node whose span contains ``span``."""
        node: cst.CSTNode = self.module
        path = [node]
        while True:
            kids, starts = self._kids(node)
            found = None
            if len(kids) > 8:
                i = bisect_right(starts, (span.line, span.col)) - 1
                candidates = [kids[j] for j in range(i, max(i - 4, -1), -1)]
            else:
                candidates = list(kids)
            for kid in candidates:
                kid_span = self.spans[kid]
                if kid_span.contains(span) and (kid_span.line, kid_span.col) != (kid_span.end_line, kid_span.end_col):
                    found = kid
                    break
            if found is None:
                return path
            path.append(found)
            node = found

    def at(self, span: Span, kind: type | tuple[type, ...]) -> cst.CSTNode:
        """The smallest node of ``kind`` whose span contains ``span``."""
        path = self._descend(span)
        for depth in range(len(path) - 1, -1, -1):
            node = path[depth]
            if isinstance(node, kind) and self.spans[node].contains(span):
                self.paths[node] = tuple(path[: depth + 1])
                return node
        # Positions that do not nest (a decorator lies before its `def`'s span): search.
        return self._scan(span, kind)

    def _scan(self, span: Span, kind: type | tuple[type, ...]) -> cst.CSTNode:
        best: tuple[int, int, int, int] | None = None
        found: cst.CSTNode | None = None
        for node, node_span in self.spans.items():
            if not isinstance(node, kind) or not node_span.contains(span):
                continue
            size = (
                node_span.end_line - node_span.line,
                node_span.end_col - node_span.col if node_span.end_line == node_span.line else 10**9,
                -node_span.line,
                -node_span.col,
            )
            if best is None or size < best:
                best, found = size, node
        if found is None:
            raise FixError(f"no {getattr(kind, '__name__', kind)} at {span}")
        self.paths[found] = self._path_by_parents(found)
        return found

    def _path_by_parents(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        if self._parents is None:
            parents: dict[cst.CSTNode, cst.CSTNode] = {}
            stack: list[cst.CSTNode] = [self.module]
            while stack:
                parent = stack.pop()
                for child in parent.children:
                    parents[child] = parent
                    stack.append(child)
            self._parents = parents
        path = [node]
        while path[-1] in self._parents:
            path.append(self._parents[path[-1]])
        return tuple(reversed(path))

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def render(self, template: str, parts: Sequence[tuple[str, Span]]) -> str:
        if not parts:
            return template.replace("{{", "{").replace("}}", "}")
        values = {name: self.code(self.at(span, cst.BaseExpression)).strip() for name, span in parts}
        return template.format(**values)
