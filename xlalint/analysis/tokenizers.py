"""Tokenizers and padding, the facts XLA101 (dynamic padding) and XLA303 (padding
without truncation) share: which expression is a tokenizer, which call encodes text,
and what a ``padding=`` value can mean.

A tokenizer is a name whose last part is ``tok``, ``tokenizer`` or ``*_tokenizer``
(not the class ``AutoTokenizer``), or a name (``self.<attr>``) the module assigns a
tokenizer that transformers/tokenizers builds: ``AutoTokenizer.from_pretrained(...)``,
``<Any>Tokenizer<Fast>.from_pretrained(...)``, ``PreTrainedTokenizerFast(...)``.
Built once per module on first use (``Context.tokenizers``).
"""

from __future__ import annotations

import ast
import re
from functools import cached_property

from xlalint.analysis.semantic import Semantic, dotted_name

# A padding argument is classified into a set of "kinds", one per value it can take
# (a conditional expression or a variable assigned in several places has several).
FIXED, DYNAMIC, NONE, UNKNOWN = "fixed", "dynamic", "none", "unknown"

#: The tokenizer methods that encode text (and take ``padding=``, ``truncation=``).
ENCODE_METHODS = frozenset({"__call__", "encode", "encode_plus", "batch_encode_plus"})
TOKENIZER_NAME = re.compile(r"^(tok|([a-z_][a-z0-9_]*)?tokenizer)$")


def builds_tokenizer(qualified: str | None) -> bool:
    """``qualified`` (a call's qualified name) builds a tokenizer: ``AutoTokenizer.from_pretrained``,
    ``BertTokenizerFast(...)``, ... from transformers/tokenizers."""
    parts = (qualified or "").split(".")
    if parts[0] not in {"transformers", "tokenizers"}:
        return False
    if parts[-1] == "from_pretrained":
        return len(parts) > 1 and "Tokenizer" in parts[-2]
    return "Tokenizer" in parts[-1]


def padding_kinds(node: ast.AST | None, assigned: dict[str, list[ast.AST]], depth: int = 0) -> set[str]:
    """The kinds of padding ``node`` can stand for; ``assigned``: the values assigned to
    plain names where ``node`` is (a name is followed three assignments deep)."""
    if isinstance(node, ast.IfExp):
        return padding_kinds(node.body, assigned, depth) | padding_kinds(node.orelse, assigned, depth)
    if isinstance(node, ast.Constant):
        if node.value is True or node.value == "longest":
            return {DYNAMIC}
        if node.value is False or node.value is None or node.value == "do_not_pad":
            return {NONE}
        if node.value == "max_length":
            return {FIXED}
        return {UNKNOWN}
    if isinstance(node, ast.Attribute) and (dotted_name(node) or "").split(".")[-2:-1] == ["PaddingStrategy"]:
        return {"LONGEST": {DYNAMIC}, "MAX_LENGTH": {FIXED}, "DO_NOT_PAD": {NONE}}.get(node.attr, {UNKNOWN})
    if isinstance(node, ast.Name) and node.id in assigned and depth < 3:
        # `padding = "max_length" if ... else False` earlier in the same scope.
        kinds: set[str] = set()
        for value in assigned[node.id]:
            kinds |= padding_kinds(value, assigned, depth + 1)
        return kinds
    return {UNKNOWN}


class Tokenizers:
    """The tokenizers of one module."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic

    @cached_property
    def variables(self) -> frozenset[str]:
        """Names (and ``self.x``) the module assigns a tokenizer built by transformers/tokenizers."""
        names: set[str] = set()
        for node in self.semantic.nodes_of(ast.Assign, ast.AnnAssign):
            if isinstance(node.value, ast.Call) and builds_tokenizer(self.semantic.call_name(node.value)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(name for name in map(dotted_name, targets) if name)
        return frozenset(names)

    @cached_property
    def _variable_last_names(self) -> frozenset[str]:
        return frozenset(name.rsplit(".", 1)[-1] for name in self.variables)

    def is_tokenizer(self, node: ast.AST) -> bool:
        # Asked of every call of the module: test the last name before building the
        # dotted one.
        last = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if last is None:
            return False
        if "tok" in last and TOKENIZER_NAME.match(last):  # the substring test first: most names fail it
            return dotted_name(node) is not None
        return last in self._variable_last_names and dotted_name(node) in self.variables

    def call_kind(self, call: ast.Call) -> str | None:
        """ "encode" for a tokenizer call that encodes text, "pad" for ``tokenizer.pad(...)``, else None."""
        if self.is_tokenizer(call.func):
            return "encode"
        func = call.func
        is_method = isinstance(func, ast.Attribute) and (func.attr in ENCODE_METHODS or func.attr == "pad")
        if is_method and self.is_tokenizer(func.value):  # type: ignore[union-attr]
            return "encode" if func.attr in ENCODE_METHODS else "pad"  # type: ignore[union-attr]
        return None
