"""XLA502 tied-weights-before-move: a model with tied weights moved to the XLA device and
never tied again.

Moving a module to an XLA device makes a new parameter for each parameter it visits, and
it visits a shared parameter once per place that holds it: the two modules that shared
one weight now hold two copies, which train apart.
"""

from __future__ import annotations

import ast

from xlalint.analysis.scripts import targets_xla
from xlalint.analysis.semantic import dotted_name, enclosing_function, enclosing_statement, method_name
from xlalint.analysis.training_objects import Move, Tie, same_object_tree
from xlalint.analysis.values import assigned_values
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import InsertStatement

_TIE_METHOD = "tie_weights"


class TiedWeightsBeforeMove(Rule):
    code = "XLA502"
    name = "tied-weights-before-move"
    summary = "A model with tied weights is moved to the XLA device and its weights are not tied again"
    fix_availability = "unsafe"
    explanation = """
## Why

Language models share one matrix between the input embedding and the output layer
(`lm_head.weight is wte.weight`). `model.to(xla_device)` makes a new `Parameter` for
every parameter it meets, and on XLA it meets the shared one twice: afterwards the two
layers hold two different tensors. Nothing fails; the embedding and the output layer
train apart, the model has one matrix more to train and to save, and a checkpoint no
longer matches the architecture's tying.

Reproduced on torch 2.9.0 + torch_xla 2.9.0 (CPU) with
`GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=32))`:
16 parameters before `.to(torch_xla.device())`, 17 after, and
`model.lm_head.weight is model.transformer.wte.weight` turns False; `model.tie_weights()`
after the move brings it back to 16. `xlalint run --compare --unsafe-fixes` on that
model trained for three steps (tests/harness/scripts/tied_lm.py): the original run
reports at the `.to` line that "`transformer.wte.weight` and `lm_head.weight` were one
parameter before the move to the XLA device and are two after (16 parameters before,
17 after)", and ends with 17 parameters, untied; the fixed run ends with 16, tied, with
the same compiles (2) and executions (3).

## What is flagged

A model whose weights are tied, moved to the XLA device (`model.to(<XLA device>)`,
`model = Cls(...).to(...)`, `accelerator.prepare(model, ...)` in a script that imports torch_xla or tests for XLA/TPU
such as `DistributedType.XLA`: on GPUs a move keeps the tying; a CUDA device that XLA104's
port makes the XLA device, `device = "cuda"` or `torch.accelerator.current_accelerator()`,
counts, and in a CUDA script the finding is reported after the port), with no
`model.tie_weights()` (or the tying assignment) after the move in the same function.
Tied models: an HF model class that ties input and output embeddings (`*ForCausalLM`,
`*LMHeadModel`, `*ForMaskedLM`, `*ForConditionalGeneration`, their `Auto*` forms,
built with `Cls(config)`, `from_pretrained` or `from_config`), and a class whose
`__init__` ties weights (`self.head.weight = self.embed.weight`): a class of the file, or
one imported from a module of the project (`from model import Transformer` finds
`model.py` beside the script or in the project root, as `python train.py` would; a
package's `pkg/model.py` too). A tie under `if tie_weights:` counts unless the model is
built with a literal that skips it (`RNNModel(..., tie_weights=False)`, or that default).
Not flagged: a model given to an HF `Trainer` (`Seq2SeqTrainer`, `SFTTrainer`, a
subclass; also through `model.to(...)` or a wrapper such as `get_peft_model(model, ...)`),
whatever the file did to it before: the Trainer ties the weights again after moving the
model.

## Fix

unsafe: insert `model.tie_weights()` (HF) or the tying assignment on the model
(`model.head.weight = model.embed.weight`) right after the move, under the same test
when the model ties only if an argument says so (`if args.tied:` for
`RNNModel(..., args.tied)`). It changes which tensor the output layer uses: the
embedding's, as the model was built.

## Example

```python
model = GPT2LMHeadModel(config).to(torch_xla.device())
```
becomes
```python
model = GPT2LMHeadModel(config).to(torch_xla.device())
model.tie_weights()
```
"""

    VALID = [
        Valid(
            """
            import torch_xla
            from transformers import GPT2LMHeadModel
            model = GPT2LMHeadModel(config).to(torch_xla.device())
            model.tie_weights()
            """
        ),
        # A model without tied weights; a tied model the Trainer moves and ties.
        Valid(
            """
            import torch_xla
            from transformers import BertForSequenceClassification, AutoModelForCausalLM, Trainer
            model = BertForSequenceClassification.from_pretrained("bert-base-uncased").to(torch_xla.device())
            lm = AutoModelForCausalLM.from_pretrained("gpt2")
            trainer = Trainer(model=lm, args=args)
            """
        ),
        # A config that unties the embeddings: nothing to tie again.
        Valid(
            """
            import torch_xla
            from transformers import GPT2Config, GPT2LMHeadModel
            config = GPT2Config(n_layer=1, tie_word_embeddings=False)
            model = GPT2LMHeadModel(config).to(torch_xla.device())
            lm = GPT2LMHeadModel.from_pretrained("gpt2", tie_word_embeddings=False).to(torch_xla.device())
            """
        ),
        # accelerate in a script that never mentions XLA: it runs on GPUs, where a move
        # keeps the tying.
        Valid(
            """
            from accelerate import Accelerator
            from transformers import AutoModelForCausalLM
            accelerator = Accelerator()
            model = AutoModelForCausalLM.from_pretrained("gpt2")
            model, optimizer = accelerator.prepare(model, optimizer)
            """
        ),
        # Tied again by hand after the move.
        Valid(
            """
            import torch_xla
            from torch import nn
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(100, 32)
                    self.head = nn.Linear(32, 100, bias=False)
                    self.head.weight = self.embed.weight
            model = LM()
            model.to(torch_xla.device())
            model.head.weight = model.embed.weight
            """
        ),
        # Tied only when asked, and built with a literal that says no (or that default).
        Valid(
            """
            import torch_xla
            from torch import nn
            class RNNModel(nn.Module):
                def __init__(self, ntoken, ninp, tie_weights=False):
                    super().__init__()
                    self.encoder = nn.Embedding(ntoken, ninp)
                    self.decoder = nn.Linear(ninp, ntoken)
                    if tie_weights:
                        self.decoder.weight = self.encoder.weight
            model = RNNModel(100, 32, tie_weights=False).to(torch_xla.device())
            other = RNNModel(100, 32).to(torch_xla.device())
            """
        ),
    ]

    INVALID = [
        Invalid(
            """
            import torch_xla
            from transformers import GPT2LMHeadModel
            model = GPT2LMHeadModel(config).to(torch_xla.device())
            """,
            unsafe_fixed="""
            import torch_xla
            from transformers import GPT2LMHeadModel
            model = GPT2LMHeadModel(config).to(torch_xla.device())
            model.tie_weights()
            """,
            count=1,
        ),
        # A module of the file that ties its weights; moved in a function.
        Invalid(
            """
            import torch_xla.core.xla_model as xm
            from torch import nn
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(100, 32)
                    self.head = nn.Linear(32, 100, bias=False)
                    self.head.weight = self.embed.weight
            def main():
                device = xm.xla_device()
                model = LM()
                model = model.to(device)
                return model
            """,
            unsafe_fixed="""
            import torch_xla.core.xla_model as xm
            from torch import nn
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(100, 32)
                    self.head = nn.Linear(32, 100, bias=False)
                    self.head.weight = self.embed.weight
            def main():
                device = xm.xla_device()
                model = LM()
                model = model.to(device)
                model.head.weight = model.embed.weight
                return model
            """,
            count=1,
        ),
        # Tied when an argument known only at run time says so: tied again under the same test.
        Invalid(
            """
            import torch_xla
            from torch import nn
            class RNNModel(nn.Module):
                def __init__(self, ntoken, ninp, tie_weights=False):
                    super().__init__()
                    self.encoder = nn.Embedding(ntoken, ninp)
                    self.decoder = nn.Linear(ninp, ntoken)
                    if tie_weights:
                        self.decoder.weight = self.encoder.weight
            model = RNNModel(100, 32, args.tied).to(torch_xla.device())
            """,
            unsafe_fixed="""
            import torch_xla
            from torch import nn
            class RNNModel(nn.Module):
                def __init__(self, ntoken, ninp, tie_weights=False):
                    super().__init__()
                    self.encoder = nn.Embedding(ntoken, ninp)
                    self.decoder = nn.Linear(ninp, ntoken)
                    if tie_weights:
                        self.decoder.weight = self.encoder.weight
            model = RNNModel(100, 32, args.tied).to(torch_xla.device())
            if args.tied:
                model.decoder.weight = model.encoder.weight
            """,
            count=1,
        ),
        # accelerate moves what it prepares; a star import from transformers.
        Invalid(
            """
            from accelerate import Accelerator, DistributedType
            from transformers import *
            accelerator = Accelerator()
            assert accelerator.distributed_type == DistributedType.XLA
            model = AutoModelForMaskedLM.from_config(config)
            model, optimizer = accelerator.prepare(model, optimizer)
            """,
            unsafe_fixed="""
            from accelerate import Accelerator, DistributedType
            from transformers import *
            accelerator = Accelerator()
            assert accelerator.distributed_type == DistributedType.XLA
            model = AutoModelForMaskedLM.from_config(config)
            model, optimizer = accelerator.prepare(model, optimizer)
            model.tie_weights()
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        objects = self.ctx.training_objects
        if not objects.moves or not objects.may_hold_tied_models:
            return
        moved: set[tuple[str, int]] = set()
        for move in sorted(objects.moves, key=lambda m: (m.statement.lineno, m.statement.col_offset)):
            built_here = _built_by(move)
            key = (move.model, id(enclosing_function(move.statement)))
            if key in moved and built_here is None:
                continue  # a later move of a model already on the device changes nothing
            moved.add(key)
            # `model = Cls(...).to(device)` moves the model it builds, whatever other
            # branches assign to the name (`if args.model == "Transformer": ... else: ...`).
            values = [built_here] if built_here is not None else objects.built_values(move.model, move.statement)
            kinds = {objects.tied_class(value) for value in values if not _moves_itself(value, move.model)}
            tied = [kind for kind in kinds if kind is not None]
            if not tied or self._given_to_trainer(move.model):
                continue
            if move.kind == "prepare" and not targets_xla(self.ctx.semantic):
                continue
            if any(self._tied_again(move, kind, ties) for kind, ties in tied):
                continue
            # A name that may hold either kind of tied model gets the words that cover both.
            what = "its input and output embeddings" if all(kind == "hf" for kind, _ in tied) else "its tied weights"
            message = f"`{move.model}` is moved to XLA and {what} are not tied again: two copies train apart"
            self.report(move.call, message, fix=self._fix_for(move, values))

    def _given_to_trainer(self, model: str) -> bool:
        """An HF ``Trainer`` (``Seq2SeqTrainer``, ``SFTTrainer``, a subclass of the file)
        is given the model, whatever was done to it on the way (``model.to(device)``,
        ``get_peft_model(model, config)``, a name bound to either): it ties again after
        its own move."""
        semantic = self.ctx.semantic
        for call in semantic.calls_of(*(name for name in semantic.calls_by_function if name.endswith("Trainer"))):
            given = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "model")]
            bound = [
                bound_value
                for value in given
                if isinstance(value, ast.Name)
                for bound_value in assigned_values(semantic.tree, lambda t, n=value.id: dotted_name(t) == n)
            ]
            if any(dotted_name(node) == model for value in given + bound for node in ast.walk(value)):
                return True
        return False

    def _tied_again(self, move: Move, kind: str, ties: tuple[Tie, ...]) -> bool:
        """``model.tie_weights()`` or the tying assignment, after the move in its function."""
        scope = enclosing_function(move.statement)
        after = (move.statement.lineno, move.statement.col_offset)
        for call in self.ctx.semantic.calls_of(_TIE_METHOD):
            receiver = dotted_name(call.func.value) if method_name(call) else None  # type: ignore[attr-defined]
            if (
                receiver
                and same_object_tree(receiver, move.model)
                and enclosing_function(call) is scope
                and (call.lineno, call.col_offset) > after
            ):
                return True
        if kind != "module":
            return False
        wanted = {(f"{move.model}.{target}", f"{move.model}.{source}") for target, source, *_ in ties}
        for node in self.ctx.semantic.nodes_of(ast.Assign):
            if (
                (node.lineno, node.col_offset) > after
                and enclosing_function(node) is scope
                and len(node.targets) == 1
                and (dotted_name(node.targets[0]), dotted_name(node.value)) in wanted
            ):
                return True
        return False

    def _fix_for(self, move: Move, values: list[ast.expr]):
        """One way to tie again only when every value the name can hold at the move ties the
        same way: those assigned before it (`model = torch.compile(model)` after the move
        is not what was moved)."""
        at = (move.statement.lineno, move.statement.col_offset)
        reaching = [
            value
            for value in values
            if (statement := enclosing_statement(value)) is move.statement
            or (statement is not None and (statement.lineno, statement.col_offset) < at)
        ]
        kinds = {
            self.ctx.training_objects.tied_class(value) for value in reaching if not _moves_itself(value, move.model)
        }
        if len(kinds) != 1:
            return None
        [kind] = kinds
        return self._fix(move, *kind) if kind is not None else None

    def _fix(self, move: Move, kind: str, ties: tuple[Tie, ...]):
        model = move.model
        if kind == "hf":
            code = f"{model}.{_TIE_METHOD}()"
        else:
            lines = []
            for target, source, *guarded in ties:
                tie = f"{model}.{target} = {model}.{source}"
                guards = guarded[0] if guarded else ()
                # A tie the model makes only when an argument says so (`if tie_weights:`
                # given `args.tied`) is repeated under the same test, or not at all.
                if any(expr is None or dotted_name(expr) is None for expr, _ in guards):
                    return None
                if guards:
                    test = " and ".join(f"{'' if truth else 'not '}{dotted_name(expr)}" for expr, truth in guards)
                    tie = f"if {test}:\n    {tie}"
                lines.append(tie)
            code = "\n".join(lines)
        return self.fix(
            "unsafe",
            "tie the weights again after the move",
            InsertStatement(self.ctx.span(move.statement), code, "after"),
        )


def _built_by(move: Move) -> ast.expr | None:
    """The value of ``model = Cls(...).to(device)``, a model built and moved at once."""
    statement = move.statement
    if (
        move.kind == "to"
        and isinstance(statement, (ast.Assign, ast.AnnAssign))
        and statement.value is move.call
        and isinstance(move.call.func.value, ast.Call)  # type: ignore[attr-defined]
    ):
        return move.call
    return None


def _moves_itself(value: ast.expr, model: str) -> bool:
    """``model.to(device)``: the same model again, not a new one."""
    while isinstance(value, ast.Call) and method_name(value) in ("to", "cuda", "train", "eval"):
        value = value.func.value  # type: ignore[attr-defined]
    return dotted_name(value) == model
