"""XLA307 growing-sequence-loop: a loop that grows a device tensor with ``torch.cat``
every iteration and feeds it to a model.

Every iteration then gives the model an input one step longer: a new shape, a new
graph, a new compile, per generated token.
"""

from __future__ import annotations

from xlalint.engine.rule import Invalid, Rule, Valid


class GrowingSequenceLoop(Rule):
    code = "XLA307"
    name = "growing-sequence-loop"
    summary = (
        "a loop grows a tensor with `torch.cat` and feeds it to a model: one new shape, and one compile, per iteration"
    )
    explanation = """
## Why

XLA compiles one graph per input shape. A generation loop that appends each new token
to its input (`idx = torch.cat((idx, idx_next), dim=1)`) and calls the model on it
hands the model a longer tensor every iteration: every token is a new graph, compiled
before it runs. minGPT's `generate`, ported to XLA, spent 565 s compiling one graph
per token and then ran out of memory maps. Cropping the input to the context length
(`idx[:, -block_size:]`) does not help until the sequence is that long.

## What is flagged

In a file that uses torch_xla (or that the port makes one), and in a local module that
such a script imports (checked with it: `xlalint check train.py` follows its imports to
the `model.py` that holds `generate`): inside a `for`/`while`
loop, `X = torch.cat((X, ...))` (also `torch.concat`, `torch.concatenate`, and
`[X, ...]`) where `X`, or a name computed from it in the loop, is passed to a model
in the same loop (a name that holds an `nn.Module`, or `self` in a module's method).
Not flagged: a loop that concatenates without calling a model on the result (data
preparation), concatenation after the loop, and a tensor the loop rebinds on every
iteration before the concatenation (the loop's own variable, a batch from the loader,
or a name assigned afresh earlier in the body): `samples = torch.cat((samples, samples))`
on a batch just taken from the loader has the same shape every iteration.

## What to do instead

No automatic fix. Keep the shape fixed: preallocate the whole sequence
(`buf = torch.zeros(b, max_len, ...)`), write each token by index
(`buf[:, t] = next_token`, or `index_copy_` with a device index) and pass the model the
fixed-length buffer with an attention mask; or run generation on the host, where
shapes cost nothing.

## Example

```python
for _ in range(max_new_tokens):
    logits = model(idx[:, -block_size:])
    idx_next = torch.multinomial(torch.softmax(logits[:, -1], -1), 1)
    idx = torch.cat((idx, idx_next), dim=1)  # XLA307
```
"""
    fix_availability = "none"

    VALID = [
        # No model call on the growing tensor: data preparation.
        Valid(
            """
            import torch
            import torch_xla
            out = torch.empty(0, 4)
            for chunk in chunks:
                out = torch.cat([out, chunk.float()])
            """
        ),
        # The model sees a fixed-shape buffer; the grown tensor is only kept.
        Valid(
            """
            import torch
            import torch_xla
            for t in range(steps):
                logits = model(buffer)
                tokens = torch.cat((tokens, logits.argmax(-1)[:, -1:]), dim=1)
                buffer[:, t] = logits.argmax(-1)[:, -1]
            """
        ),
        # No torch_xla: a CUDA/CPU script compiles nothing.
        Valid(
            """
            import torch
            for _ in range(n):
                logits = model(idx)
                idx = torch.cat((idx, logits[:, -1:].argmax(-1)), dim=1)
            """
        ),
        # A batch rebound from the loader every iteration and doubled under a flag: the
        # same shape each time (a ViT trainer's repeated augmentation).
        Valid(
            """
            import torch
            import torch_xla
            for samples, targets in loader:
                samples = samples.to(device)
                if args.repeat:
                    samples = torch.cat((samples, samples), dim=0)
                    targets = torch.cat((targets, targets), dim=0)
                loss = criterion(model(samples), targets)
            """
        ),
        # Assigned afresh before the concatenation on every iteration.
        Valid(
            """
            import torch
            import torch_xla
            for step in range(steps):
                x = next(batches)
                x = torch.cat([x, noise], dim=1)
                y = model(x)
            """
        ),
    ]

    INVALID = [
        # minGPT's generate, in the model class itself.
        Invalid(
            """
            import torch
            import torch.nn as nn
            import torch_xla

            class GPT(nn.Module):
                @torch.no_grad()
                def generate(self, idx, max_new_tokens):
                    for _ in range(max_new_tokens):
                        idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
                        logits, _ = self(idx_cond)
                        probs = torch.softmax(logits[:, -1, :], dim=-1)
                        idx_next = torch.multinomial(probs, num_samples=1)
                        idx = torch.cat((idx, idx_next), dim=1)
                    return idx
            """,
            count=1,
        ),
        # A while loop and a model held by a variable.
        Invalid(
            """
            import torch
            import torch_xla
            model = torch.nn.Linear(4, 4).to(torch_xla.device())
            while x.shape[0] < 64:
                y = model(x)
                x = torch.concat([x, y[-1:]])
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        if not self.ctx.in_xla_program:
            return
        for growth in self.ctx.growing.growths:
            self.report(
                growth.call,
                f"`{growth.name}` grows every iteration and is fed to a model: a new shape and a compile per iteration",
            )
