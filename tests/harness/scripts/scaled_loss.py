"""A loss scaled before backward (GradScaler, as timm's NativeScaler does it): the loss the
user computes is about 1; what backward sees is 1024 times that. Plain PyTorch on the CPU."""

import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
x = torch.randn(16, 4)
y = x.sum(dim=1, keepdim=True)
for step in range(5):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"step {step} loss {loss.item():.4f}")
