"""XLA310 fused-optimizer-on-xla: a fused optimizer kernel on the XLA device.

``fused=True`` asks torch for a one-kernel optimizer step that exists for CUDA, CPU and
a few other devices, not for XLA: the first ``optimizer.step()`` raises. transformers
asks for it by itself: its ``TrainingArguments`` default to ``optim="adamw_torch_fused"``
with torch 2.8 and later, so an HF Trainer script dies at its first step on XLA.
"""

from __future__ import annotations

from xlalint.analysis.scripts import calls_to
from xlalint.analysis.semantic import keyword, string_value
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import RemoveKeyword, SetKeyword

# The optimizers of torch.optim with a `fused` implementation (torch 2.9).
FUSED_OPTIMIZERS = frozenset(
    {f"torch.optim.{name}" for name in ("Adam", "AdamW", "SGD", "Adagrad")}
    | {f"torch.optim.{module}.{name}" for module, name in (("adam", "Adam"), ("adamw", "AdamW"), ("sgd", "SGD"))}
)
TRAINING_ARGUMENTS = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
    }
)
FUSED_OPTIM = "adamw_torch_fused"
PLAIN_OPTIM = "adamw_torch"
MESSAGE = "`fused=True` optimizer on the XLA device: its first step raises (no fused kernel for XLA)"
DEFAULT_MESSAGE = (
    f'`TrainingArguments` without `optim=`: transformers defaults to `"{FUSED_OPTIM}"`, which raises on XLA'
)
NAMED_MESSAGE = f'`optim="{FUSED_OPTIM}"` raises on the XLA device (no fused kernel for XLA)'


class FusedOptimizerOnXla(Rule):
    code = "XLA310"
    name = "fused-optimizer-on-xla"
    summary = "A fused optimizer step on the XLA device: the first step raises"
    explanation = f"""
## Why

A fused optimizer does the whole update of every parameter in one kernel. torch has one
for CUDA, the CPU and a few other devices, not for XLA: on torch_xla 2.9.0
`torch.optim.AdamW(model.parameters(), fused=True)` raises at its first step
(`RuntimeError: fused=True requires all the params to be floating point Tensors of
supported devices: ['mps', 'cuda', 'xpu', 'hpu', 'cpu', 'mtia', 'privateuseone'] but
torch.float32 and xla`, measured on CPU). transformers asks for it without being told:
since torch 2.8 its `TrainingArguments` default to `optim="{FUSED_OPTIM}"` (transformers
5.25), so an HF Trainer fine-tune that ran on the GPU dies at its first step on XLA
(seen porting an instruction fine-tune). The other implementations (`foreach`, the
default loop) compute the same update.

## What is flagged

- `torch.optim.Adam`/`AdamW`/`SGD`/`Adagrad` given `fused=True`, in a file that uses
  torch_xla (or that the port makes one), or in a local module such a script imports;
- `TrainingArguments(...)` / `Seq2SeqTrainingArguments(...)` with no `optim=` or with
  `optim="{FUSED_OPTIM}"`, in any file: the Trainer runs on the XLA device wherever
  torch_xla is installed, with no import of it in the script.
Not flagged: `fused=False`, a `fused=` computed from the device (XLA104 ports the test),
another `optim=`, and a call that passes `**kwargs` (the choice may be in them).

## Fix

safe: drop `fused=True` (the default implementation computes the same update); give
`TrainingArguments` `optim="{PLAIN_OPTIM}"` (PyTorch's AdamW, the same update as the
fused one).

## Example

```python
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8)
```
becomes
```python
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, optim="{PLAIN_OPTIM}")
```
"""
    fix_availability = "safe"

    VALID = [
        Valid(
            """
            import torch
            import torch_xla
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            opt2 = torch.optim.AdamW(model.parameters(), fused=False)
            """
        ),
        # A CUDA or CPU script that never runs on XLA: fused is its business.
        Valid("import torch\nopt = torch.optim.AdamW(model.parameters(), fused=True)\n"),
        # The Trainer's optimizer chosen, or passed on whole.
        Valid(
            """
            from transformers import TrainingArguments
            a = TrainingArguments(output_dir="out", optim="adamw_torch")
            b = TrainingArguments(**config)
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch
            import torch_xla
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
            """,
            fixed="""
            import torch
            import torch_xla
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            """,
            count=1,
        ),
        Invalid(
            """
            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", per_device_train_batch_size=8)
            trainer = Trainer(model=model, args=args, train_dataset=ds)
            """,
            fixed="""
            from transformers import Trainer, TrainingArguments
            args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, optim="adamw_torch")
            trainer = Trainer(model=model, args=args, train_dataset=ds)
            """,
            count=1,
        ),
        Invalid(
            """
            import transformers
            args = transformers.Seq2SeqTrainingArguments("out", optim="adamw_torch_fused")
            """,
            fixed="""
            import transformers
            args = transformers.Seq2SeqTrainingArguments("out", optim="adamw_torch")
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        semantic = self.ctx.semantic
        for call in calls_to(semantic, TRAINING_ARGUMENTS | FUSED_OPTIMIZERS):
            name = semantic.call_name(call)
            if any(k.arg is None for k in call.keywords):
                continue  # `**kwargs`: the choice may be in them
            if name in TRAINING_ARGUMENTS:
                self._training_arguments(call)
            elif name in FUSED_OPTIMIZERS and self.ctx.in_xla_program:
                fused = keyword(call, "fused")
                if fused is not None and getattr(fused.value, "value", None) is True:
                    fix = self.fix("safe", "Drop `fused=True`", RemoveKeyword(self.ctx.span(call), "fused"))
                    self.report(fused, MESSAGE, fix)

    def _training_arguments(self, call) -> None:
        optim = keyword(call, "optim")
        if optim is not None and string_value(optim.value) != FUSED_OPTIM:
            return
        operation = SetKeyword(self.ctx.span(call), "optim", f'"{PLAIN_OPTIM}"')
        fix = self.fix("safe", f'Use `optim="{PLAIN_OPTIM}"`', operation)
        self.report(optim.value if optim is not None else call, NAMED_MESSAGE if optim else DEFAULT_MESSAGE, fix)
