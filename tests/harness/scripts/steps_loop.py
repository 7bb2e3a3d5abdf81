"""100 synced steps of a tiny regression on the XLA device; prints when it gets to the end
(`xlalint run --steps N` stops it before). With `--sleep S` it sleeps after step 2
(for a run killed by the timeout)."""

import sys
import time

import torch
import torch_xla

torch.manual_seed(0)
device = torch_xla.device()
model = torch.nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
y = x.sum(dim=1, keepdim=True)
sleep = float(sys.argv[sys.argv.index("--sleep") + 1]) if "--sleep" in sys.argv else 0.0
for step in range(100):
    opt.zero_grad()
    loss = ((model(x.to(device)) - y.to(device)) ** 2).mean()
    loss.backward()
    opt.step()
    torch_xla.sync()
    if sleep and step == 1:
        time.sleep(sleep)
print("done 100 steps")
