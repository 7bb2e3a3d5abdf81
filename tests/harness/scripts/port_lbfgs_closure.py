"""LBFGS in a multi-process entry: the optimizer runs the closure, whose backward makes
the gradients it steps with. The port all-reduces them inside the closure (XLA203,
unsafe) and syncs each step (XLA103); LBFGS's own host reads are reported (XLA102).
"""

import torch
import torch_xla
import torch_xla.runtime as xr


def _mp_fn(index):
    torch.manual_seed(0)
    device = torch_xla.device()
    inputs = torch.randn(32, 4).to(device)
    targets = inputs.sum(dim=1, keepdim=True).to(device)
    model = torch.nn.Linear(4, 1).to(device)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=2)
    for _ in range(2):

        def closure():
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            return loss

        optimizer.step(closure)
    print(f"world {xr.world_size()} weight device {model.weight.device}")


if __name__ == "__main__":
    torch_xla.launch(_mp_fn)
