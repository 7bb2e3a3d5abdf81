"""Removing an object the XLA port has no use for (a CUDA ``GradScaler``, stream or
event) together with every use of it: the object cannot stay while its uses go (it
raises without CUDA), nor go while a use stays."""

from __future__ import annotations

import ast
from abc import ABC, abstractmethod

from xlalint.analysis.semantic import ancestors, enclosing_statement, parent
from xlalint.analysis.syntax import is_alone_on_its_lines
from xlalint.model import Import, Operation, RemoveStatement
from xlalint.rules.xla104.writer import Writer


class ObjectRemoval(ABC):
    """A fix that removes an object the XLA port has no use for (a CUDA ``GradScaler``,
    stream or event) and rewrites every use of it.

    The object must be assigned, alone on its lines, to a variable (uses: that name in
    its scope) or to ``self.<attr>`` (uses: ``<self>.<attr>`` in that class); the variable
    may be assigned again when each assignment builds such an object (the PyTorch AMP
    recipe builds one scaler per section): they all go. Every use must be one that
    ``rewrite`` records an operation for, or there is no fix, and ``blocker`` says
    which line stands in the way.
    """

    def __init__(self, writer: Writer, call: ast.Call):
        self.writer = writer
        self.ctx = writer.ctx
        self.call = call
        self.operations: list[Operation] = []
        self.imports: list[Import] = []
        self.blocker = "it has a use the fix cannot rewrite"
        # Why the use ``rewrite`` turned down cannot be rewritten (it may say more).
        self.refusal = "has a use the fix cannot rewrite"
        # The statements that build the object: this one and any re-assignment.
        self.constructions: list[ast.stmt] = []

    @abstractmethod
    def is_construction(self, value: ast.AST) -> bool:
        """``value`` builds another such object (a re-assignment that goes too)."""

    @abstractmethod
    def rewrite(self, use: ast.AST) -> bool:
        """Record the operations that remove ``use``; False if it cannot be removed
        (``refusal`` may then say why)."""

    def _blocked(self, node: ast.AST, why: str) -> None:
        self.blocker = f"line {node.lineno} {why}"

    def rewritten_uses(self) -> list[ast.AST] | None:
        """Find the object's uses and record their rewrites; None (``blocker`` set) when
        it is not assigned as it must be or a use cannot be rewritten."""
        stmt = parent(self.call)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is self.call:
            target = stmt.target
        else:
            self._blocked(stmt if isinstance(stmt, ast.stmt) else self.call, "does not assign it to a name")
            return None
        if not is_alone_on_its_lines(stmt):
            self._blocked(stmt, "shares its line with another statement")
            return None
        self.constructions = [stmt]
        uses = self._uses(target)
        if uses is None:
            return None
        for use in uses:
            if not self.rewrite(use):
                self._blocked(enclosing_statement(use) or use, self.refusal)
                return None
        return uses

    def remove_constructions(self) -> None:
        for construction in sorted(self.constructions, key=lambda n: n.lineno):
            self.operations.append(RemoveStatement(self.ctx.span(construction)))

    def _uses(self, target: ast.AST) -> list[ast.AST] | None:
        """Every other read of the object, or None (with ``blocker`` set) when it is
        assigned anything but another such object."""
        if isinstance(target, ast.Name):
            # The same variable: the same name in the same scope (a function's local
            # `scaler` is not another function's).
            return self._reads([n for n in self.writer.devices.variable_uses(target) if n is not target])
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            cls = next((a for a in ancestors(target) if isinstance(a, ast.ClassDef)), None)
            if cls is None:
                self._blocked(target, "sets an attribute outside a class")
                return None
            # `self.stream` and `torch.cuda.stream` share a name, not a value: an attribute
            # of an imported module is not a use.
            uses = self.ctx.semantic.attribute_by_class(target.attr)
            outside = uses.first_outside(cls)
            inside = [n for n in uses.in_class(cls) if n is not target]
            for n in (outside, *(n for n in inside if not self._is_self_attribute(n))):
                if n is not None:
                    self._blocked(enclosing_statement(n) or n, f"reads `.{target.attr}` outside its class")
                    return None
            return self._reads(inside)
        self._blocked(target, "does not assign it to a name")
        return None

    def _reads(self, occurrences: list) -> list[ast.AST] | None:
        """The reads among ``occurrences``; a store is fine only as another construction."""
        reads = []
        for node in occurrences:
            if isinstance(node.ctx, ast.Load):
                reads.append(node)
                continue
            stmt = parent(node)
            if (
                isinstance(stmt, ast.Assign)
                and stmt.targets == [node]
                and self.is_construction(stmt.value)
                and is_alone_on_its_lines(stmt)
            ):
                self.constructions.append(stmt)
                continue
            self._blocked(enclosing_statement(node) or node, "assigns it something else")
            return None
        return reads

    @staticmethod
    def _is_self_attribute(node: ast.Attribute) -> bool:
        """``<first parameter of the enclosing method>.<attr>``."""
        func = next((a for a in ancestors(node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if func is None or not isinstance(node.value, ast.Name):
            return False
        params = [*func.args.posonlyargs, *func.args.args]
        return bool(params) and params[0].arg == node.value.id
