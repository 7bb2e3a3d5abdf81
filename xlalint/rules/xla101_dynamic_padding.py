"""XLA101 dynamic-padding: batches padded to their longest sequence.

XLA compiles one graph per input shape. Padding each batch to its own longest
sequence (``padding=True``/``"longest"``, the HF data collators' default, the
Trainer's default collator, ``pad_sequence`` in a collate function) gives nearly
every batch a new shape, hence a new compilation. Padding to a fixed ``max_length``
gives one shape.

What counts as *a tokenizer* (a heuristic, there are no types):

* a name or attribute whose last component is ``tok`` or ends with ``tokenizer`` and
  starts with a lower-case letter or ``_`` (``tokenizer``, ``self.tokenizer``,
  ``src_tokenizer``; not the class ``AutoTokenizer``);
* a variable or ``self.<attr>`` assigned, anywhere in the module, a tokenizer built by
  transformers/tokenizers: ``AutoTokenizer.from_pretrained(...)``,
  ``<Any>Tokenizer<Fast>.from_pretrained(...)``, ``PreTrainedTokenizerFast(...)``.

*A tokenizer call* is a call of a tokenizer itself or of its ``__call__``,
``encode``, ``encode_plus``, ``batch_encode_plus`` methods; ``tokenizer.pad(...)`` is
checked the same way but gets no ``truncation=`` in the fix (it takes none).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from functools import cached_property

from xlalint.analysis.semantic import ancestors, dotted_name, enclosing_function, keyword, scope_bindings
from xlalint.analysis.tokenizers import DYNAMIC, FIXED, NONE, encodes_one_text, may_hold_tokenizers, padding_kinds
from xlalint.engine.rule import Invalid, Option, Rule, Valid
from xlalint.model import Import, ReplaceExpr, SetKeyword

COLLATORS = {
    # class name -> index of `padding` when it is passed positionally
    "DataCollatorWithPadding": 1,
    "DataCollatorForSeq2Seq": 2,
    "DataCollatorForTokenClassification": 1,
}
TRAINERS = frozenset(
    {
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
        "transformers.trainer.Trainer",
        "transformers.trainer_seq2seq.Seq2SeqTrainer",
    }
)
PAD_SEQUENCE = "torch.nn.utils.rnn.pad_sequence"
# Words of an identifier (snake_case and CamelCase): a condition naming `tpu`/`xla`
# (`on_tpu`, `args.tpu`, `is_torch_xla_available()`, `DistributedType.XLA`) tests for XLA.
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_XLA_WORDS = frozenset({"tpu", "xla"})


def _is_dynamic(kinds: set[str]) -> bool:
    """Pads to the longest on some path, and never offers the fixed alternative
    (a conditional with a "max_length" branch is the recommended TPU idiom)."""
    return DYNAMIC in kinds and FIXED not in kinds


# --- XLA/TPU branches -----------------------------------------------------------------


def _xla_polarity(test: ast.AST) -> bool | None:
    """True when ``test`` holds on XLA (``if on_tpu``), False when it holds off XLA
    (``if not is_torch_xla_available()``), None when it says nothing about XLA."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _xla_polarity(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        return next((p for p in map(_xla_polarity, test.values) if p is not None), None)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        sides = [test.left, test.comparators[0]]
        if not any(_mentions_xla(side) for side in sides):
            return None
        op = test.ops[0]
        if any(isinstance(s, ast.Constant) and s.value is None for s in sides):
            # `args.tpu_num_cores is not None` holds on TPU.
            return isinstance(op, (ast.IsNot, ast.NotEq))
        return not isinstance(op, (ast.NotEq, ast.IsNot, ast.NotIn))
    return True if _mentions_xla(test) else None


def _mentions_xla(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and _is_xla_word(sub.id):
            return True
        if isinstance(sub, ast.Attribute) and _is_xla_word(sub.attr):
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.lower() in {"xla", "tpu"}:
            return True
    return False


def _is_xla_word(identifier: str) -> bool:
    return any(word.lower() in _XLA_WORDS for word in _WORD.findall(identifier))


def _terminates(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def on_non_xla_path(node: ast.AST) -> bool:
    """Is ``node`` only reached when not on XLA: the ``else`` of ``if on_tpu:``, the
    body of ``if not on_tpu:``, or after ``if on_tpu: return ...``?"""
    child = node
    for anc in ancestors(node):
        if isinstance(anc, (ast.If, ast.IfExp)) and child is not anc.test:
            polarity = _xla_polarity(anc.test)
            in_body = child is anc.body or (isinstance(anc.body, list) and child in anc.body)
            if polarity is not None and in_body != polarity:
                return True
        for field in ("body", "orelse", "finalbody"):
            block = getattr(anc, field, None)
            if isinstance(block, list) and child in block:
                earlier = block[: block.index(child)]
                if any(
                    isinstance(s, ast.If) and _xla_polarity(s.test) is True and _terminates(s.body) for s in earlier
                ):
                    return True
        child = anc
    return False


class DynamicPadding(Rule):
    code = "XLA101"
    name = "dynamic-padding"
    summary = "Dynamic padding: every new batch length compiles a new XLA graph"
    explanation = """
## Why
XLA compiles one graph per input shape. Padding each batch to its longest sequence
(`padding=True`, `padding="longest"`, the HF data collators' default, the `Trainer`'s
default collator, `pad_sequence` in a collate function) gives almost every batch a new
sequence length, so training keeps compiling instead of running. Pad to one fixed
length instead.

## What is flagged
- a tokenizer call or `tokenizer.pad(...)` with `padding=True`, `padding="longest"` or
  `padding=PaddingStrategy.LONGEST` (also through a variable assigned those values);
- `DataCollatorWithPadding`, `DataCollatorForSeq2Seq`,
  `DataCollatorForTokenClassification` without `padding="max_length"` (their default
  pads to the longest);
- an HF `Trainer(...)`/`Seq2SeqTrainer(...)` given `tokenizer=`/`processing_class=` and no
  `data_collator=` (or `data_collator=None`): it then uses `DataCollatorWithPadding`.
  Only when the file itself tokenizes without padding (a tokenizer call with no
  `padding=`, or `padding=False`): data tokenized elsewhere may already be padded;
- `torch.nn.utils.rnn.pad_sequence` in a collate function (a function whose name
  contains `collate`, or a function/lambda passed as `collate_fn=`).

A *tokenizer* is a name or attribute called `tok`/`tokenizer`/`*_tokenizer`, or a
variable assigned `AutoTokenizer.from_pretrained(...)` and the like.

## Not flagged
- a conditional value with a `"max_length"` branch: `"max_length" if on_tpu else "longest"`;
- code on the non-XLA path of a branch that tests for XLA/TPU (`DistributedType.XLA`,
  `is_torch_xla_available()`, `args.tpu`, `device.type == "xla"`), including the code
  after `if <on xla>: return ...`;
- `padding=False` (no padding: the data is expected to be padded already);
- a tokenizer call on one text, which pads nothing: `encode`/`encode_plus`, a string
  (a literal, an f-string, `.format(...)`, a concatenation), a parameter annotated
  `str`, an element of a `Sequence[str]` (`[tokenizer(t, padding="longest") for t in
  strings]`). The batch's shapes then come from the collator, which is reported.

## Fix (unsafe: changes the shapes the model sees)
`padding="max_length"`, keeping an existing `max_length=` or adding one: the
`max_length` the file's tokenizer calls truncate to when they all give the same one and
it can be read where the fix goes (`max_length=args.max_length`: batches are not padded
past what the tokenizer keeps), the collator's own tokenizer's `model_max_length` when
they truncate to a tokenizer's `model_max_length`, else the option `max-length` (default 512). For tokenizer calls
(not `.pad`) `truncation=True` unless a truncation strategy is already set. For
collators the same keywords; a `Trainer` gets
`data_collator=DataCollatorWithPadding(<tokenizer>, padding="max_length", max_length=N)`.
`pad_sequence` has no fixed-length form: no fix; pad each batch to a fixed length
yourself (`F.pad` to `max_length`).

The fix must not change what the model learns. When the labels are a copy of the padded
`input_ids` (`labels = copy.deepcopy(input_ids)`, `.clone()`, `labels = input_ids`,
`enc["labels"] = enc["input_ids"].copy()`) and nothing sets their pad positions to -100,
padding to `max_length` would make the model learn to predict pad tokens on every
position past the text: the fix is withheld, with that reason (`note: ... fix not
offered: ...`). Mask the labels' pad positions first
(`labels[enc["attention_mask"] == 0] = -100`); then the fix is offered.

## Example
```python
enc = tokenizer(texts, padding="longest")
# becomes
enc = tokenizer(texts, padding="max_length", max_length=512, truncation=True)
```
"""
    fix_availability = "sometimes"
    # Tokenizer calls and collators, in a CUDA script as in an XLA one.
    same_after_port = True
    # At most 2**20 tokens (the longest contexts models have): a larger one pads every batch out of memory.
    options = {
        "max-length": Option(
            512, "The fixed length the fix pads to when the call gives no max_length.", min=1, max=2**20
        )
    }

    VALID = [
        Valid(
            """
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            enc = tokenizer(texts, padding="max_length", max_length=128, truncation=True)
            """
        ),
        # A conditional with a "max_length" branch is the recommended TPU idiom.
        Valid(
            """
            import torch
            enc = tokenizer(texts, padding="max_length" if on_tpu else "longest", max_length=128)
            """
        ),
        # The non-XLA path of an XLA test, after an early return (HF accelerate examples).
        Valid(
            """
            from accelerate import DistributedType
            def collate_fn(examples):
                if accelerator.distributed_type == DistributedType.XLA:
                    return tokenizer.pad(examples, padding="max_length", max_length=128, return_tensors="pt")
                return tokenizer.pad(examples, padding="longest", return_tensors="pt")
            """
        ),
        Valid(
            """
            from transformers import DataCollatorWithPadding, is_torch_xla_available
            if is_torch_xla_available():
                collator = DataCollatorWithPadding(tokenizer, padding="max_length", max_length=128)
            else:
                collator = DataCollatorWithPadding(tokenizer)
            """
        ),
        Valid(
            """
            import torch
            collator = None if args.tpu else DataCollatorForSeq2Seq(tokenizer)
            """
        ),
        # The Trainer's default collator is harmless when the file pads to max_length.
        Valid(
            """
            from transformers import Trainer
            ds = ds.map(lambda b: tokenizer(b["text"], padding="max_length", truncation=True), batched=True)
            trainer = Trainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer)
            """
        ),
        # ...or when it does not tokenize at all (the data may come padded).
        Valid(
            """
            from transformers import Trainer
            trainer = Trainer(model=model, args=args, train_dataset=ds, tokenizer=tokenizer)
            """
        ),
        Valid(
            """
            from transformers import Trainer, default_data_collator
            ds = ds.map(lambda b: tokenizer(b["text"], truncation=True), batched=True)
            trainer = Trainer(model=model, train_dataset=ds, tokenizer=tokenizer, data_collator=default_data_collator)
            """
        ),
        # A variable with a "max_length" branch (HF run_glue.py).
        Valid(
            """
            import torch
            padding = "max_length" if pad_to_max_length else False
            enc = tokenizer(texts, padding=padding, max_length=128, truncation=True)
            """
        ),
        # pad_sequence outside a collate function; not a tokenizer (a class, a processor).
        Valid(
            """
            from torch.nn.utils.rnn import pad_sequence
            from transformers import AutoTokenizer
            def embed(seqs):
                return pad_sequence(seqs, batch_first=True)
            x = AutoTokenizer(padding=True)
            y = processor(texts, padding=True)
            """
        ),
        Valid(
            """
            import torch
            enc = tokenizer(texts, padding=False)
            """
        ),
        # One text at a time pads nothing (Stanford Alpaca's `_tokenize_fn`).
        Valid(
            """
            from typing import Sequence
            def _tokenize_fn(strings: Sequence[str], tokenizer):
                return [tokenizer(text, return_tensors="pt", padding="longest", truncation=True) for text in strings]
            def encode(prompt: str):
                return tokenizer(prompt, padding=True)
            """
        ),
    ]
    INVALID = [
        # The labels copy the padded input_ids: padded to max_length the model would
        # learn pad tokens, so the fix is withheld.
        Invalid(
            """
            import copy
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            def tokenize(batch):
                enc = tokenizer(batch["text"], padding="longest", truncation=True, max_length=256)
                enc["labels"] = copy.deepcopy(enc["input_ids"])
                return enc
            """,
            fixed=None,
            unsafe_fixed=None,
            count=1,
        ),
        # ...and offered once the pad positions of the labels are -100.
        Invalid(
            """
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            def tokenize(texts):
                enc = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
                labels = enc["input_ids"].clone()
                labels[enc["attention_mask"] == 0] = -100
                return enc, labels
            """,
            unsafe_fixed="""
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            def tokenize(texts):
                enc = tokenizer(texts, padding="max_length", truncation=True, max_length=256, return_tensors="pt")
                labels = enc["input_ids"].clone()
                labels[enc["attention_mask"] == 0] = -100
                return enc, labels
            """,
            count=1,
        ),
        Invalid(
            """
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            enc = tokenizer(texts, padding="longest")
            """,
            unsafe_fixed="""
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
            enc = tokenizer(texts, padding="max_length", max_length=512, truncation=True)
            """,
            count=1,
        ),
        # A tokenizer found through its assignment; an existing max_length is kept.
        Invalid(
            """
            import transformers
            tk = transformers.BertTokenizerFast.from_pretrained("bert-base-uncased")
            enc = tk.batch_encode_plus(texts, padding=True, max_length=64, truncation="only_first")
            """,
            unsafe_fixed="""
            import transformers
            tk = transformers.BertTokenizerFast.from_pretrained("bert-base-uncased")
            enc = tk.batch_encode_plus(texts, padding="max_length", max_length=64, truncation="only_first")
            """,
            count=1,
        ),
        Invalid(
            """
            from transformers.utils import PaddingStrategy
            batch = self.tokenizer.pad(features, padding=PaddingStrategy.LONGEST, return_tensors="pt")
            """,
            unsafe_fixed="""
            from transformers.utils import PaddingStrategy
            batch = self.tokenizer.pad(features, padding="max_length", return_tensors="pt", max_length=128)
            """,
            options={"max-length": 128},
            count=1,
        ),
        # The XLA path of the test is checked: "longest" ignores max_length.
        Invalid(
            """
            from accelerate import DistributedType
            def collate_fn(examples):
                if accelerator.distributed_type == DistributedType.XLA:
                    return tokenizer.pad(examples, padding="longest", max_length=128)
                return tokenizer.pad(examples, padding="longest")
            """,
            unsafe_fixed="""
            from accelerate import DistributedType
            def collate_fn(examples):
                if accelerator.distributed_type == DistributedType.XLA:
                    return tokenizer.pad(examples, padding="max_length", max_length=128)
                return tokenizer.pad(examples, padding="longest")
            """,
            count=1,
        ),
        # The collator pads to the length the tokenizer truncates to, `args` being the
        # same variable there; in `build`, `args` is another one: the option's 512.
        Invalid(
            """
            from transformers import DataCollatorWithPadding
            def main(args):
                def encode(batch):
                    return tokenizer(batch["text"], truncation=True, max_length=args.max_length)
                collator = DataCollatorWithPadding(tokenizer)
            def build(args):
                return DataCollatorWithPadding(tokenizer)
            """,
            unsafe_fixed="""
            from transformers import DataCollatorWithPadding
            def main(args):
                def encode(batch):
                    return tokenizer(batch["text"], truncation=True, max_length=args.max_length)
                collator = DataCollatorWithPadding(tokenizer, padding="max_length", max_length=args.max_length)
            def build(args):
                return DataCollatorWithPadding(tokenizer, padding="max_length", max_length=512)
            """,
            count=2,
        ),
        # The tokenizer truncates to its own maximum, read through another name (a dataset
        # class's parameter): the collator pads to its tokenizer's `model_max_length`, not
        # to a number that may pass the model's positions.
        Invalid(
            """
            from transformers import DataCollatorForSeq2Seq
            class Examples:
                def __init__(self, texts, tok):
                    self.items = [tok(t, truncation=True, max_length=tok.model_max_length) for t in texts]
            def train(tokenizer, model):
                return DataCollatorForSeq2Seq(tokenizer, model=model, padding=True)
            """,
            unsafe_fixed="""
            from transformers import DataCollatorForSeq2Seq
            class Examples:
                def __init__(self, texts, tok):
                    self.items = [tok(t, truncation=True, max_length=tok.model_max_length) for t in texts]
            def train(tokenizer, model):
                return DataCollatorForSeq2Seq(tokenizer, model=model, padding="max_length", max_length=tokenizer.model_max_length)
            """,
            count=1,
        ),
        Invalid(
            """
            from transformers import DataCollatorForSeq2Seq, DataCollatorWithPadding
            c1 = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)
            c2 = DataCollatorForSeq2Seq(tokenizer, model=model, padding="longest")
            """,
            unsafe_fixed="""
            from transformers import DataCollatorForSeq2Seq, DataCollatorWithPadding
            c1 = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8, padding="max_length", max_length=512)
            c2 = DataCollatorForSeq2Seq(tokenizer, model=model, padding="max_length", max_length=512)
            """,
            count=2,
        ),
        Invalid(
            """
            import transformers as tf
            collator = tf.DataCollatorForTokenClassification(tokenizer, True, 256)
            """,
            unsafe_fixed="""
            import transformers as tf
            collator = tf.DataCollatorForTokenClassification(tokenizer, "max_length", 256)
            """,
            count=1,
        ),
        # The Trainer's default collator, in a file that tokenizes without padding.
        Invalid(
            """
            from transformers import Trainer
            ds = ds.map(lambda b: tokenizer(b["text"], truncation=True), batched=True)
            trainer = Trainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer)
            """,
            unsafe_fixed="""
            from transformers import DataCollatorWithPadding, Trainer
            ds = ds.map(lambda b: tokenizer(b["text"], truncation=True), batched=True)
            trainer = Trainer(
                model=model,
                args=args,
                train_dataset=ds,
                processing_class=tokenizer,
                data_collator=DataCollatorWithPadding(tokenizer, padding="max_length", max_length=512),
            )
            """,
            count=1,
        ),
        Invalid(
            """
            import transformers
            enc = tokenizer(texts, padding=False)
            trainer = transformers.Seq2SeqTrainer(model, args, None, ds, tokenizer=tokenizer)
            """,
            unsafe_fixed="""
            import transformers
            enc = tokenizer(texts, padding=False)
            trainer = transformers.Seq2SeqTrainer(
                model,
                args,
                transformers.DataCollatorWithPadding(tokenizer, padding="max_length", max_length=512),
                ds,
                tokenizer=tokenizer,
            )
            """,
            count=1,
        ),
        Invalid(
            """
            from torch.nn.utils.rnn import pad_sequence
            from torch.utils.data import DataLoader
            def make_batch(items):
                return pad_sequence([x for x, _ in items], batch_first=True)
            loader = DataLoader(ds, batch_size=8, collate_fn=make_batch)
            loader2 = DataLoader(ds, collate_fn=lambda b: pad_sequence(b, batch_first=True))
            """,
            count=2,
        ),
        Invalid(
            """
            import torch
            class Collator:
                def __call__(self, batch):
                    return torch.nn.utils.rnn.pad_sequence(batch, batch_first=True)
            def my_collate(batch):
                return torch.nn.utils.rnn.pad_sequence(batch)
            """,
            count=2,
        ),
    ]

    # -- module facts, gathered during the engine's walk (no walk of our own) ------------
    def begin(self) -> None:
        self.trainer_classes: set[str] = set(TRAINERS)
        self.calls: list[ast.Call] = []
        # Padding needs a tokenizer, a transformers collator or Trainer (transformers is
        # one of the tokenizers' packages) or `pad_sequence`: without any, no call is asked.
        if not (may_hold_tokenizers(self.ctx.source, self.ctx.semantic) or "pad_sequence" in self.ctx.source):
            self.skipped_visits.add(ast.Call)
        self.defs: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = []
        self._unpadded: bool | None = None
        self._assigned: dict[ast.AST, dict[str, list[ast.AST]]] = {}
        self.assignments: list[ast.Assign] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.defs.append(node)
        if any(self.ctx.semantic.qualified_name(b) in TRAINERS for b in node.bases):
            self.trainer_classes.add(node.name)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.defs.append(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        self.calls.append(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.assignments.append(node)

    @cached_property
    def labels_copy(self) -> ast.Assign | None:
        """An assignment that makes the labels a copy of the encoded ``input_ids``
        (``labels = copy.deepcopy(input_ids)``, ``enc["labels"] = enc["input_ids"].clone()``,
        ``input_ids = labels = ...``), when the module masks no pad position of them
        with -100 (``labels[labels == tokenizer.pad_token_id] = -100``)."""
        if any(_masks_pads(node) for node in self.assignments):
            return None
        return next((node for node in self.assignments if _copies_input_ids_to_labels(node)), None)

    def _collate_functions(self) -> set[ast.AST]:
        """Functions and lambdas passed as ``collate_fn=`` (a class instance passed
        there contributes its ``__call__``)."""
        names: set[str] = set()
        found: set[ast.AST] = set()
        for call in self.calls:
            kw = keyword(call, "collate_fn")
            if kw is None:
                continue
            value = kw.value
            if isinstance(value, ast.Call):
                func = dotted_name(value.func) or ""
                if func.split(".")[-1] == "partial" and value.args:  # functools.partial(f, ...)
                    value = value.args[0]
                else:  # Collator(...): its __call__
                    names.add(func.split(".")[-1])
                    continue
            if isinstance(value, ast.Lambda):
                found.add(value)
            elif dotted_name(value):
                names.add(dotted_name(value).split(".")[-1])  # type: ignore[union-attr]
        for node in self.defs:
            if node.name not in names:
                continue
            if isinstance(node, ast.ClassDef):
                found.update(s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__call__")
            else:
                found.add(node)
        return found

    def _in_collate_function(self, node: ast.AST) -> bool:
        for anc in ancestors(node):
            if anc in self.collate_fns:
                return True
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)) and "collat" in anc.name.lower():
                return True
            if isinstance(anc, ast.ClassDef) and "collat" in anc.name.lower():
                return True
        return False

    def assigned_in_scope(self, node: ast.AST) -> dict[str, list[ast.AST]]:
        """Values assigned to plain names in the function around ``node`` (or the module)."""
        scope: ast.AST = enclosing_function(node) or self.ctx.tree
        if scope in self._assigned:
            return self._assigned[scope]
        values: dict[str, list[ast.AST]] = {}
        self._assigned[scope] = values
        for sub in ast.walk(scope):
            if isinstance(sub, ast.Assign):
                for target in sub.targets:
                    if isinstance(target, ast.Name):
                        values.setdefault(target.id, []).append(sub.value)
            elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.value is not None:
                values.setdefault(sub.target.id, []).append(sub.value)
        return values

    def file_tokenizes_unpadded(self) -> bool:
        """Some tokenizer call with no ``padding=`` (or ``padding=False``)."""
        if self._unpadded is None:
            self._unpadded = False
            for call in self.calls:
                if self.ctx.tokenizers.call_kind(call) != "encode":
                    continue
                if any(kw.arg is None for kw in call.keywords):  # **kwargs may carry padding
                    continue
                kw = keyword(call, "padding")
                kinds = {NONE} if kw is None else padding_kinds(kw.value, self.assigned_in_scope(call))
                if kinds == {NONE}:
                    self._unpadded = True
                    break
        return self._unpadded

    def fixed_length(self, at: ast.AST, tokenizer: ast.expr | None = None) -> str:
        """The ``max_length`` a fix at ``at`` pads to: the one the file's tokenizer calls
        truncate to, when they all give the same and it means the same at ``at``
        (``args.max_length`` with ``args`` bound in a scope around both), so batches are
        not padded past what the tokenizer keeps; the tokenizer's own maximum when they
        truncate to ``<tokenizer>.model_max_length`` and the fix is given the tokenizer
        (a collator's: ``tokenizer.model_max_length`` read where the collator is made,
        never a number past the model's positions); else the ``max-length`` option."""
        lengths = {
            self.segment(kw.value): kw.value
            for call in self.calls
            if self.ctx.tokenizers.call_kind(call) == "encode"
            and (kw := keyword(call, "max_length")) is not None
            and not _is_none(kw.value)  # None: the model's own maximum
        }
        if len(lengths) == 1:
            (text, value), *_ = lengths.items()
            if "\n" not in text and self._same_meaning(value, at):
                return text
        if (
            tokenizer is not None
            and lengths
            and all(isinstance(v, ast.Attribute) and v.attr == "model_max_length" for v in lengths.values())
            and "\n" not in (own := self.segment(tokenizer))
        ):
            return (
                f"{own}.model_max_length"
                if isinstance(tokenizer, (ast.Name, ast.Attribute))
                else f"({own}).model_max_length"
            )
        return str(self.option("max-length"))

    def _same_meaning(self, value: ast.expr, at: ast.AST) -> bool:
        """The names ``value`` reads are bound in scopes that enclose ``at`` too, and
        nothing between rebinds them: moved to ``at``, it reads the same variables."""
        allowed = (ast.Constant, ast.Name, ast.Attribute, ast.Load, ast.BinOp, ast.operator, ast.Subscript)
        if not all(isinstance(node, allowed) for node in ast.walk(value)):
            return False
        around_at = {id(scope) for scope in ancestors(at) if isinstance(scope, _NAME_SCOPES)}
        for name in {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}:
            binding = next(
                (
                    scope
                    for scope in ancestors(value)
                    if isinstance(scope, _NAME_SCOPES) and name in scope_bindings(scope)
                ),
                None,
            )
            if binding is None or id(binding) not in around_at:
                return False
            if any(
                name in scope_bindings(scope)
                for scope in ancestors(at)
                if isinstance(scope, _NAME_SCOPES)
                and scope is not binding
                and any(a is binding for a in ancestors(scope))
            ):
                return False
        return True

    # -- the checks ------------------------------------------------------------------
    def finish(self) -> None:
        self.collate_fns = self._collate_functions()
        for call in self.calls:
            check = self.checker_for(call)
            # The branch analysis walks up the tree: only for the calls that matter.
            if check is not None and not on_non_xla_path(call):
                check(call)

    def checker_for(self, node: ast.Call) -> Callable[[ast.Call], None] | None:
        kind = self.ctx.tokenizers.call_kind(node)
        if kind is not None:
            return lambda call: self.check_tokenizer_call(call, kind)
        qualified = self.ctx.semantic.call_name(node) or ""
        last = qualified.rsplit(".", 1)[-1]
        if qualified.startswith("transformers.") and last in COLLATORS:
            return lambda call: self.check_collator(call, COLLATORS[last])
        if qualified in self.trainer_classes or (
            isinstance(node.func, ast.Name) and node.func.id in self.trainer_classes
        ):
            return self.check_trainer
        if qualified == PAD_SEQUENCE and self._in_collate_function(node):
            return self.report_pad_sequence
        return None

    def report_pad_sequence(self, call: ast.Call) -> None:
        self.report(
            call,
            "`pad_sequence` in a collate function pads to each batch's longest sequence: a new graph per length",
        )

    def check_tokenizer_call(self, call: ast.Call, kind: str) -> None:
        kw = keyword(call, "padding")
        if kw is None or not _is_dynamic(padding_kinds(kw.value, self.assigned_in_scope(call))):
            return
        if kind == "encode" and encodes_one_text(call):
            return  # one text: padded to its own length, which is no padding
        message = f"`padding={self.segment(kw.value)}` pads to each batch's longest sequence: a new graph per length"
        copy = self.labels_copy
        if copy is not None:
            self.report(kw, message, fix_withheld=_labels_reason(copy.lineno))
            return
        span = self.ctx.span(call)
        n = self.fixed_length(call)
        ops = [
            SetKeyword(span, "padding", '"max_length"'),
            SetKeyword(span, "max_length", str(n), only_if_missing=True),
        ]
        what = 'padding="max_length"'
        if kind == "encode" and self._needs_truncation(call):
            ops.append(SetKeyword(span, "truncation", "True"))
            what += ", truncation=True"
        if keyword(call, "max_length") is None:
            what += f", max_length={n}"
        self.report(kw, message, fix=self.fix("unsafe", f"Pad to a fixed length ({what})", *ops))

    @staticmethod
    def _needs_truncation(call: ast.Call) -> bool:
        """No truncation, or one switched off; a strategy (``"only_first"``, a variable) is kept."""
        kw = keyword(call, "truncation")
        if kw is None:
            return True
        return isinstance(kw.value, ast.Constant) and kw.value.value in (False, None, "do_not_truncate")

    def check_collator(self, call: ast.Call, padding_index: int) -> None:
        kw = keyword(call, "padding")
        positional = call.args[padding_index] if len(call.args) > padding_index else None
        value = kw.value if kw is not None else positional
        if any(k.arg is None for k in call.keywords) and value is None:
            return  # **kwargs may carry padding
        kinds = {DYNAMIC} if value is None else padding_kinds(value, self.assigned_in_scope(call))
        if not _is_dynamic(kinds):
            return
        span = self.ctx.span(call)
        n = self.fixed_length(call, call.args[0] if call.args else getattr(keyword(call, "tokenizer"), "value", None))
        if positional is not None:
            ops: list = [ReplaceExpr(self.ctx.span(positional), '"max_length"')]
        else:
            ops = [SetKeyword(span, "padding", '"max_length"')]
        if len(call.args) <= padding_index + 1:  # `max_length` follows `padding` positionally
            ops.append(SetKeyword(span, "max_length", str(n), only_if_missing=True))
        name = self.segment(call.func)
        self.report(
            call,
            f"`{name}` pads to each batch's longest sequence by default: a new graph per length",
            fix=self.fix("unsafe", 'Pad to a fixed length (padding="max_length")', *ops),
        )

    def check_trainer(self, call: ast.Call) -> None:
        if any(k.arg is None for k in call.keywords):
            return
        tokenizer = keyword(call, "processing_class") or keyword(call, "tokenizer")
        if tokenizer is None or _is_none(tokenizer.value):
            return
        collator_kw = keyword(call, "data_collator")
        collator = collator_kw.value if collator_kw is not None else (call.args[2] if len(call.args) > 2 else None)
        if collator is not None and not _is_none(collator):
            return
        if not self.file_tokenizes_unpadded():
            return
        ref, imports = self.collator_reference()
        tok = self.segment(tokenizer.value)
        if "\n" in tok:
            tok = f"({tok})"
        new = f'{ref}({tok}, padding="max_length", max_length={self.fixed_length(call, tokenizer.value)})'
        if collator is not None and collator_kw is None:
            op: ReplaceExpr | SetKeyword = ReplaceExpr(self.ctx.span(collator), new)
        else:
            op = SetKeyword(self.ctx.span(call), "data_collator", new)
        self.report(
            call,
            "without a `data_collator` the Trainer pads to each batch's longest sequence: a new graph per length",
            fix=self.fix("unsafe", "Pass a collator that pads to a fixed length", op, imports=imports),
        )

    def segment(self, node: ast.AST) -> str:
        """The source of ``node`` (``ast.get_source_segment`` re-splits the whole file)."""
        span = self.ctx.span(node)
        lines = self.ctx.lines[span.line - 1 : span.end_line]
        if len(lines) == 1:
            return lines[0][span.col : span.end_col]
        return "\n".join([lines[0][span.col :], *lines[1:-1], lines[-1][: span.end_col]])

    def collator_reference(self) -> tuple[str, tuple[Import, ...]]:
        """How to spell ``DataCollatorWithPadding``, and the import that needs.

        ``ctx.reference`` would ask for ``import transformers.DataCollatorWithPadding``
        (a module import of a class), so build ``from transformers import ...`` here.
        """
        table = self.ctx.semantic.imports
        for qualified in (
            "transformers.DataCollatorWithPadding",
            "transformers.data.DataCollatorWithPadding",
            "transformers.data.data_collator.DataCollatorWithPadding",
        ):
            alias = table.alias_for(qualified)
            if alias:
                return alias, ()
        module = table.alias_for("transformers")
        if module:
            return f"{module}.DataCollatorWithPadding", ()
        if "DataCollatorWithPadding" in table.bindings:
            return "transformers.DataCollatorWithPadding", (Import("transformers"),)
        return "DataCollatorWithPadding", (Import("transformers", name="DataCollatorWithPadding"),)


# The scopes whose names the code nested in them sees (a class body's names are not
# seen by its methods).
_NAME_SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


# --- labels copied from the padded input_ids -------------------------------------------
# Calls and methods that copy what they are given (or a part of it).
_COPIES = frozenset({"deepcopy", "copy", "clone", "detach", "tolist", "list", "tensor", "LongTensor", "array"})
# What a pad mask reads: a test of the pad token or of the attention mask.
_PAD_WORDS = ("pad_token", "pad_id", "attention_mask")


def _labels_reason(line: int) -> str:
    return (
        f"not offered: the labels are a copy of the padded `input_ids` (line {line}); padded to max_length, "
        "the model would learn to predict the pad tokens. Set the labels' pad positions to -100 "
        '(`labels[enc["attention_mask"] == 0] = -100`), then pad to a fixed length'
    )


def _copies_input_ids_to_labels(node: ast.Assign) -> bool:
    """``labels = <a copy of input_ids>``, or ``input_ids = labels = ...``."""
    labels = [t for t in node.targets if _names_labels(t)]
    if not labels:
        return False
    if any(_names_input_ids(t) for t in node.targets):
        return True
    return _names_input_ids(_copied(node.value))


def _copied(value: ast.AST) -> ast.AST:
    """What ``copy.deepcopy(x)``, ``x.clone()``, ``list(x)``, ``x[0]``... copy: ``x``."""
    while True:
        if isinstance(value, ast.Call):
            func = value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name not in _COPIES:
                return value
            if isinstance(func, ast.Attribute) and not value.args:
                value = func.value  # x.clone(), x.detach()
            elif len(value.args) == 1:
                value = value.args[0]  # copy.deepcopy(x), list(x)
            else:
                return value
        elif isinstance(value, ast.Subscript) and not _string_key(value):
            value = value.value  # x[0], x[:]
        else:
            return value


def _string_key(node: ast.Subscript) -> str | None:
    key = node.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _names_labels(node: ast.AST) -> bool:
    return _last_word(node) in ("labels", "label", "targets") if _last_word(node) else False


def _names_input_ids(node: ast.AST) -> bool:
    return _last_word(node) == "input_ids"


def _last_word(node: ast.AST) -> str | None:
    """``labels`` of ``labels``, ``self.labels``, ``enc["labels"]``, ``enc.labels``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _string_key(node)
    return None


def _masks_pads(node: ast.Assign) -> bool:
    """An assignment to the labels (or to some of their positions) that sets the pad
    positions to -100: ``labels[labels == tokenizer.pad_token_id] = -100``,
    ``labels = [[-100 if t == pad_id else t for t in l] for l in labels]``,
    ``enc["labels"] = torch.where(enc["attention_mask"] == 1, ids, IGNORE_INDEX)``."""
    if not any(_names_labels(_copied(t.value) if isinstance(t, ast.Subscript) else t) for t in node.targets):
        return False
    text = ast.unparse(node)
    ignores = any(
        (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and getattr(n.operand, "value", None) == 100)
        or (isinstance(n, ast.Name) and "ignore" in n.id.lower())
        for n in ast.walk(node)
    )
    return ignores and any(word in text for word in _PAD_WORDS)
