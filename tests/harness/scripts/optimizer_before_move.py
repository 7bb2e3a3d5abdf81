"""A regression ported to XLA whose optimizer is built before the model moves (XLA501)."""

import torch
import torch_xla
from torch import nn


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    device = torch_xla.device()
    model.to(device)
    x = torch.randn(32, 8).to(device)
    y = x.sum(dim=1, keepdim=True)
    first = None
    for _step in range(6):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        if first is None:
            first = loss.detach()
    print(f"loss {first.item():.4f} -> {loss.item():.4f}")


if __name__ == "__main__":
    main()
