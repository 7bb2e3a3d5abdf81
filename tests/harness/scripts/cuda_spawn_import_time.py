"""A CUDA script half-ported to torch_xla.launch: its device is chosen at module level
and as a default argument.

Ported with `torch_xla.device()` in those places, the launcher's process would create
the XLA runtime when it imports the module, and every worker would fail with "Runtime
is already initialized". XLA104 writes `torch.device("xla")` there instead: the default
XLA device of whichever process uses it, which starts nothing.
"""

import os

import torch
import torch_xla
import torch_xla.core.xla_model as xm

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# The user's fallback: only the unsafe fix may drop it.
data_device = torch.device("cuda:0" if torch.cuda.is_available() else os.environ.get("DATA_DEVICE", "cpu"))


def make_batch(batch_size, device="cuda"):
    return torch.randn(batch_size, 8, device=device), torch.randn(batch_size, 2, device=device)


def _mp_fn(index):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        x, y = make_batch(4)
        loss = torch.nn.functional.mse_loss(model(x.to(data_device)), y)
        opt.zero_grad()
        loss.backward()
        xm.optimizer_step(opt)
        torch_xla.sync()
    print(f"worker {index} on {next(model.parameters()).device}: loss {loss.item():.4f}")


if __name__ == "__main__":
    torch_xla.launch(_mp_fn, args=())
