"""XLA305: a torch_xla script that compiles its model with torch.compile's default backend.

Inductor cannot lower XLA tensors: the original fails at the first call; with
`backend="openxla"` (the unsafe fix) it trains.
"""

import torch
import torch.nn as nn
import torch_xla

torch.manual_seed(0)
device = torch_xla.device()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
compiled = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(32, 8).to(device)
y = x.sum(dim=1, keepdim=True).to(device)
losses = []
for _ in range(4):
    loss = nn.functional.mse_loss(compiled(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    torch_xla.sync()
    losses.append(loss.detach())
print("loss", f"{losses[0].item():.4f}", "->", f"{losses[-1].item():.4f}")
