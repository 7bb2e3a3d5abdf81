"""Tokenizers and padding, the facts XLA101 (dynamic padding) and XLA303 (padding
without truncation) share: which expression is a tokenizer, which call encodes text,
whether it encodes one text or a batch (:func:`encodes_one_text`), and what a
``padding=`` value can mean.

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

from xlalint.analysis.semantic import Semantic, ancestors, dotted_name
from xlalint.analysis.values import assigned_values

# A padding argument is classified into a set of "kinds", one per value it can take
# (a conditional expression or a variable assigned in several places has several).
FIXED, DYNAMIC, NONE, UNKNOWN = "fixed", "dynamic", "none", "unknown"

#: The tokenizer methods that encode text (and take ``padding=``, ``truncation=``).
ENCODE_METHODS = frozenset({"__call__", "encode", "encode_plus", "batch_encode_plus"})
TOKENIZER_NAME = re.compile(r"^(tok|([a-z_][a-z0-9_]*)?tokenizer)$")
#: The packages whose tokenizers a module may build (``builds_tokenizer``).
TOKENIZER_PACKAGES = frozenset({"transformers", "tokenizers"})


def may_hold_tokenizers(source: str, semantic: Semantic) -> bool:
    """Whether the module can hold a tokenizer at all: a name with ``tok`` in it, or
    one that transformers or tokenizers builds (imported). Most modules cannot, and
    then no call of theirs need be asked about."""
    return "tok" in source or semantic.imports.imports_any(TOKENIZER_PACKAGES)


def builds_tokenizer(qualified: str | None) -> bool:
    """``qualified`` (a call's qualified name) builds a tokenizer: ``AutoTokenizer.from_pretrained``,
    ``BertTokenizerFast(...)``, ... from transformers/tokenizers."""
    parts = (qualified or "").split(".")
    if parts[0] not in TOKENIZER_PACKAGES:
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


# --- one text or a batch ------------------------------------------------------------
#: Tokenizer methods that encode one sequence (or one pair) whatever they are given.
ONE_TEXT_METHODS = frozenset({"encode", "encode_plus"})
#: Methods of ``str`` that give a string.
_STRING_METHODS = frozenset(
    {"format", "format_map", "join", "strip", "lstrip", "rstrip", "lower", "upper", "replace", "title", "capitalize"}
)
_FORMAT_METHODS = frozenset({"format", "format_map"})
#: Annotations of a sequence of strings: iterating one gives one string.
_SEQUENCES = frozenset({"Sequence", "List", "list", "Iterable", "Iterator", "tuple", "Tuple", "Collection"})
_MAX_DEPTH = 4


def encodes_one_text(call: ast.Call) -> bool:
    """The tokenizer call ``call`` encodes one text (not a batch): ``encode``/``encode_plus``,
    or a first argument (``text=``) that is a string: a literal, an f-string, a
    concatenation or ``.format`` of one, ``str(...)``, a name annotated ``str`` or
    assigned only strings, or an element of a sequence annotated ``Sequence[str]``
    (``[tokenizer(text, ...) for text in strings]``). Padding such a call to its longest
    sequence pads nothing."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ONE_TEXT_METHODS:
        return True
    text = call.args[0] if call.args else next((kw.value for kw in call.keywords if kw.arg == "text"), None)
    return text is not None and is_string(text)


def is_string(expr: ast.AST, depth: int = 0) -> bool:
    """``expr`` is known to be one ``str`` (see :func:`encodes_one_text`)."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, ast.JoinedStr) or (isinstance(expr, ast.Constant) and isinstance(expr.value, str)):
        return True
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Mod)):
        return is_string(expr.left, depth + 1) or (isinstance(expr.op, ast.Add) and is_string(expr.right, depth + 1))
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Name) and func.id == "str":
            return True
        if not isinstance(func, ast.Attribute):
            return False
        # `.format(...)` is a method of strings alone; `"".join(...)` of a literal.
        if func.attr in _FORMAT_METHODS or (func.attr == "join" and isinstance(func.value, ast.Constant)):
            return True
        return func.attr in _STRING_METHODS and is_string(func.value, depth + 1)
    if isinstance(expr, ast.Name):
        return _name_is_string(expr, depth)
    return False


def _name_is_string(name: ast.Name, depth: int) -> bool:
    """A name annotated ``str``, assigned only strings in its scope, or the variable of a
    comprehension or ``for`` over a sequence of strings."""
    for ancestor in ancestors(name):
        if isinstance(ancestor, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in ancestor.generators:
                if _is_target(generator.target, name.id):
                    return _is_strings(generator.iter, depth + 1)
        if isinstance(ancestor, (ast.For, ast.AsyncFor)) and _is_target(ancestor.target, name.id):
            return _is_strings(ancestor.iter, depth + 1)
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            return _scope_string(ancestor, name.id, depth)
    return False


def _scope_string(scope: ast.AST, name: str, depth: int) -> bool:
    """In ``scope``, ``name`` is a parameter annotated ``str``, or every assignment to it
    (and there is one) is of a string."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = scope.args
        for parameter in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            if parameter.arg == name:
                return _annotated(parameter.annotation, "str")
    values = [
        value
        for value in assigned_values(scope, lambda target: isinstance(target, ast.Name) and target.id == name, True)
    ]
    return bool(values) and all(is_string(value, depth + 1) for value in values)


def _is_strings(expr: ast.AST, depth: int) -> bool:
    """``expr`` is a sequence of strings: a list/tuple of strings, or a name annotated
    ``Sequence[str]`` (``List[str]``, ``list[str]``...)."""
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return bool(expr.elts) and all(is_string(element, depth) for element in expr.elts)
    if not isinstance(expr, ast.Name):
        return False
    for ancestor in ancestors(expr):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = ancestor.args
            for parameter in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
                if parameter.arg == expr.id:
                    return _sequence_of_str(parameter.annotation)
            return False
    return False


def _sequence_of_str(annotation: ast.AST | None) -> bool:
    if not isinstance(annotation, ast.Subscript):
        return False
    container = annotation.value
    container_name = container.attr if isinstance(container, ast.Attribute) else getattr(container, "id", None)
    element = annotation.slice
    if isinstance(element, ast.Tuple) and element.elts:
        element = element.elts[0]  # tuple[str, ...]
    return container_name in _SEQUENCES and _annotated(element, "str")


def _annotated(annotation: ast.AST | None, name: str) -> bool:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value == name
    return isinstance(annotation, ast.Name) and annotation.id == name


def _is_target(target: ast.AST, name: str) -> bool:
    return isinstance(target, ast.Name) and target.id == name
