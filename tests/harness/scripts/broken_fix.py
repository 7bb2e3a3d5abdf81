"""A CUDA training script that checks it saw every sample of each epoch. XLA301's unsafe
fix (`drop_last=True`: no partial last batch to compile a new graph for) leaves the last
two samples out, and the script's own check fails: AssertionError. The device choice and
the sync are ported safely, and the original runs on the CPU (CUDA hidden), so
`--compare --unsafe-fixes` sees the fixed run crash where the port ran, and `--bisect`
names that one fix."""

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(18, 4)
y = x.sum(dim=1, keepdim=True)
loader = DataLoader(TensorDataset(x, y), batch_size=4)

step = 0
for epoch in range(8):
    seen = 0
    for xb, yb in loader:
        opt.zero_grad()
        loss = ((model(xb.to(device)) - yb.to(device)) ** 2).mean()
        loss.backward()
        opt.step()
        seen += len(xb)
        step += 1
        if step % 4 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    assert seen == len(x), f"epoch {epoch} saw {seen} of {len(x)} samples"
