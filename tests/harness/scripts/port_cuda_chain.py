"""A CUDA script whose model goes to the GPU at the end of a multi-line method chain."""

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).float().cuda(0)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    x = torch.randn(16, 4).cuda(0)
    y = x.sum(dim=1, keepdim=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("model on", next(model.parameters()).device)
