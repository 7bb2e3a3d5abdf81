"""XLA303 padding-without-truncation: padding to max_length that does not truncate.

``padding="max_length"`` pads short inputs up to ``max_length`` but leaves longer
ones as they are unless ``truncation`` is on: every input longer than ``max_length``
brings a new sequence length, hence a new XLA graph (and a batch that cannot be
stacked with the others).

Tokenizers are recognised as XLA101 recognises them (``xlalint.analysis.tokenizers``: a
name ``tok``/``tokenizer``/``*_tokenizer``, or a variable assigned a
transformers/tokenizers tokenizer);
``tokenizer.pad(...)`` takes no ``truncation`` and is not checked.
"""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import enclosing_function, keyword
from xlalint.analysis.tokenizers import FIXED, may_hold_tokenizers, padding_kinds
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import SetKeyword
from xlalint.rules.xla101_dynamic_padding import on_non_xla_path

# Values of `truncation=` that switch it off; any other value (True, a strategy such as
# "only_first", a variable) is taken to truncate.
_NO_TRUNCATION = (False, None, "do_not_truncate")


class PaddingWithoutTruncation(Rule):
    code = "XLA303"
    name = "padding-without-truncation"
    summary = 'padding="max_length" without truncation=True: longer inputs keep their length'
    fix_availability = "unsafe"
    # Tokenizer calls, in a CUDA script as in an XLA one.
    same_after_port = True
    explanation = """
## Why
`padding="max_length"` gives every batch one shape only if no input is longer than
`max_length`: without `truncation=True` the tokenizer pads the short ones and keeps
the long ones whole, so each longer input brings a new sequence length and a new
XLA compilation (and batches whose rows cannot be stacked).

## What is flagged
A tokenizer call (`tokenizer(...)`, `.encode`, `.encode_plus`, `.batch_encode_plus`;
not `tokenizer.pad`, which takes no `truncation`) whose padding is `"max_length"`
(also `PaddingStrategy.MAX_LENGTH`, the old `pad_to_max_length=True`, a variable
assigned it, or a conditional with a `"max_length"` branch) and which has no
`truncation=`, or one that is `False`/`None`/`"do_not_truncate"`. Calls that pass
`**kwargs` (which may carry `truncation`) and calls on the non-XLA path of a branch
that tests for XLA/TPU are not flagged.

## Fix (unsafe: longer inputs are cut)
Add `truncation=True` (or replace the value that switched it off). XLA101's fix of
dynamic padding adds the same keyword, so the two fixes agree.

## Example
```python
enc = tokenizer(texts, padding="max_length", max_length=128)
# becomes
enc = tokenizer(texts, padding="max_length", max_length=128, truncation=True)
```
"""

    VALID = [
        Valid(
            """
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            enc = tokenizer(texts, padding="max_length", max_length=128, truncation=True)
            enc = tokenizer(pairs, padding="max_length", max_length=128, truncation="only_second")
            enc = tokenizer(texts, padding="max_length", max_length=128, truncation=args.truncate)
            """
        ),
        # Not fixed-length padding (XLA101's business), `.pad`, `**kwargs`, not a tokenizer.
        Valid(
            """
            import torch
            enc = tokenizer(texts, padding="longest")
            batch = tokenizer.pad(features, padding="max_length", max_length=128)
            enc = tokenizer(texts, padding="max_length", **tokenize_kwargs)
            out = processor(texts, padding="max_length")
            """
        ),
        # The non-XLA path of a test for XLA.
        Valid(
            """
            from accelerate import DistributedType
            def tokenize(batch):
                if accelerator.distributed_type != DistributedType.XLA:
                    return tokenizer(batch["text"], padding="max_length")
                return tokenizer(batch["text"], padding="max_length", truncation=True)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            enc = tokenizer(texts, padding="max_length", max_length=128)
            """,
            unsafe_fixed="""
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            enc = tokenizer(texts, padding="max_length", max_length=128, truncation=True)
            """,
            count=1,
        ),
        # Switched off explicitly; found through a variable and a tokenizer variable.
        Invalid(
            """
            import transformers
            tk = transformers.BertTokenizerFast.from_pretrained("bert-base-uncased")
            padding = "max_length" if pad_to_max_length else False
            enc = tk.batch_encode_plus(texts, padding=padding, max_length=64, truncation=False)
            """,
            unsafe_fixed="""
            import transformers
            tk = transformers.BertTokenizerFast.from_pretrained("bert-base-uncased")
            padding = "max_length" if pad_to_max_length else False
            enc = tk.batch_encode_plus(texts, padding=padding, max_length=64, truncation=True)
            """,
            count=1,
        ),
        # The old spelling, and a PaddingStrategy.
        Invalid(
            """
            from transformers.utils import PaddingStrategy
            a = self.tokenizer.encode_plus(text, max_length=32, pad_to_max_length=True)
            b = self.tokenizer(text, padding=PaddingStrategy.MAX_LENGTH)
            """,
            unsafe_fixed="""
            from transformers.utils import PaddingStrategy
            a = self.tokenizer.encode_plus(text, max_length=32, pad_to_max_length=True, truncation=True)
            b = self.tokenizer(text, padding=PaddingStrategy.MAX_LENGTH, truncation=True)
            """,
            count=2,
        ),
    ]

    def begin(self) -> None:
        self.calls: list[ast.Call] = []
        self._assigned: dict[ast.AST, dict[str, list[ast.AST]]] = {}
        if not may_hold_tokenizers(self.ctx.source, self.ctx.semantic):
            self.skipped_visits.add(ast.Call)  # no call encodes text

    def visit_Call(self, node: ast.Call) -> None:
        self.calls.append(node)

    def finish(self) -> None:
        for call in self.calls:
            if self.ctx.tokenizers.call_kind(call) == "encode":
                self.check(call)

    def check(self, call: ast.Call) -> None:
        if any(kw.arg is None for kw in call.keywords):
            return  # **kwargs may carry truncation
        padding = keyword(call, "padding")
        old_style = keyword(call, "pad_to_max_length")
        if padding is not None:
            if FIXED not in padding_kinds(padding.value, self._assigned_in_scope(call)):
                return
            shown = padding
        elif old_style is not None and isinstance(old_style.value, ast.Constant) and old_style.value.value is True:
            shown = old_style
        else:
            return
        truncation = keyword(call, "truncation")
        if truncation is not None and not (
            isinstance(truncation.value, ast.Constant) and truncation.value.value in _NO_TRUNCATION
        ):
            return
        if on_non_xla_path(call):
            return
        self.report(
            shown,
            "Padding to max_length without truncation=True: longer inputs keep their length and compile new graphs",
            fix=self.fix(
                "unsafe",
                "Truncate to max_length (truncation=True)",
                SetKeyword(self.ctx.span(call), "truncation", "True"),
            ),
        )

    def _assigned_in_scope(self, node: ast.AST) -> dict[str, list[ast.AST]]:
        """Values assigned to plain names in the function around ``node``, and for the
        names it does not assign, at module level (``padding = ...`` read by a function)."""
        function = enclosing_function(node)
        module = self._assigned_in(self.ctx.tree, shallow=True)
        if function is None:
            return module
        return {**module, **self._assigned_in(function, shallow=False)}

    def _assigned_in(self, scope: ast.AST, shallow: bool) -> dict[str, list[ast.AST]]:
        if scope not in self._assigned:
            values: dict[str, list[ast.AST]] = {}
            nodes = _module_level(scope) if shallow else ast.walk(scope)
            for sub in nodes:
                if isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        if isinstance(target, ast.Name):
                            values.setdefault(target.id, []).append(sub.value)
                elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.value is not None:
                    values.setdefault(sub.target.id, []).append(sub.value)
            self._assigned[scope] = values
        return self._assigned[scope]


def _module_level(tree: ast.AST):
    """The nodes of a module outside its functions and classes."""
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))
