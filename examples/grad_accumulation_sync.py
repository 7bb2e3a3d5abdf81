"""XLA103 missing-sync: the loop syncs only when the accumulated gradients are applied.

With `torch_xla.sync()` inside `if (i + 1) % ACCUMULATION == 0:`, the traced graph
grows over ACCUMULATION micro-steps before anything runs: one big graph to compile and
to hold in memory, plus other graphs for the micro-steps left over at the end of an
epoch (30 is not a multiple of 8). Expect `xlalint check` to flag the loop; the safe fix
moves the `torch_xla.sync()` out of the guard to the end of the loop body, so each
micro-step is a small graph (and the steps that apply the gradients sync once).

What `xlalint run --compare examples/grad_accumulation_sync.py` shows on this tiny model
on CPU: as many compilations either way (4), but 1.5-2x less compile time in the fixed
copy (its graphs are an eighth of the size), and more executions (one per micro-step
instead of one per 8). On large models the graph size is what matters:
compile time and device memory grow with the micro-steps a graph spans.

Runs on CPU with PJRT_DEVICE=CPU, on synthetic data.
"""

import torch
import torch_xla

EPOCHS = 2
MICRO_STEPS = 30  # per epoch
ACCUMULATION = 8


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    inputs = torch.randn(MICRO_STEPS, 16, 32)
    labels = torch.randint(0, 4, (MICRO_STEPS, 16))

    optimizer.zero_grad()
    for epoch in range(EPOCHS):
        for i in range(MICRO_STEPS):
            x, y = inputs[i].to(device), labels[i].to(device)
            loss = loss_fn(model(x), y) / ACCUMULATION
            loss.backward()
            if (i + 1) % ACCUMULATION == 0:
                optimizer.step()
                optimizer.zero_grad()
                torch_xla.sync()
        print(f"epoch {epoch} last micro-batch loss {loss.item() * ACCUMULATION:.4f}")


if __name__ == "__main__":
    main()
