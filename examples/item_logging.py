"""XLA102 host-sync-in-step: `loss.item()` printed every step.

`.item()` needs the loss on the host, so torch_xla must compile and execute the graph
up to the loss right there, in the middle of the step, and then again at the sync for
the rest: two executions (and an extra graph) per step instead of one. Expect
`xlalint check` to flag the `print(...)`; the safe fix defers it with
`xm.add_step_closure(...)`, which runs after the step's sync when the loss is already
computed. `xlalint run --compare examples/item_logging.py` shows the `.item()` line as
an execution cause joined to XLA102 in the original, and half the executions in the
fixed copy.

Runs on CPU with PJRT_DEVICE=CPU, on synthetic data.
"""

import torch
import torch_xla

STEPS = 30


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    true_weights = torch.randn(16, 1)

    for i in range(STEPS):
        inputs = torch.randn(32, 16)
        targets = inputs @ true_weights
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        print(f"step {i} loss {loss.item():.4f}")
        torch_xla.sync()


if __name__ == "__main__":
    main()
