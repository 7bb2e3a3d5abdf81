"""XLA106 amp-clip-order: gradients clipped while they are still scaled.

With a GradScaler, the gradients after `scaler.scale(loss).backward()` are multiplied
by the loss scale (1024 here). Clipping them to norm 1.0 before `scaler.unscale_(opt)`
clips the *scaled* gradients, and `scaler.step` then divides them by the scale again:
every update ends up about 1000x too small and the model barely trains. Expect
`xlalint check` to flag the `clip_grad_norm_` call; the safe fix inserts
`scaler.unscale_(optimizer)` before it.

`xlalint run --compare examples/amp_clip_order.py` shows the same compile and execution
counts (one extra op does not change the graphs' number); the difference is in the
script's own output: the final loss is far lower in the fixed copy (about 0.9 against
14.6 for the original, checked on CPU). Both runs also show an execution per step at
`scaler.step(...)`: the GradScaler reads its inf/NaN check on the host, a sync per step
that bf16 training without a scaler does not pay.

torch_xla 2.9 removed `torch_xla.amp.GradScaler`; torch's own
`torch.amp.GradScaler("xla")` works with XLA tensors (checked on torch_xla 2.9 CPU), with
fp16 autocast on the XLA device. (bf16 autocast, the usual choice on TPU, needs no
scaler at all.)

Runs on CPU with PJRT_DEVICE=CPU, on synthetic data.
"""

import torch
import torch_xla

STEPS = 40


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("xla", init_scale=1024.0)
    true_weights = torch.randn(16, 1)

    for _ in range(STEPS):
        inputs = torch.randn(32, 16)
        targets = inputs @ true_weights
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        with torch.autocast("xla", dtype=torch.float16):
            prediction = model(inputs).float()
        loss = torch.nn.functional.mse_loss(prediction, targets)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
        torch_xla.sync()

    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
