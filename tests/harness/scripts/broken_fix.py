"""A CUDA script whose log line is built for the GPU it runs on: with CUDA it names a
`memory` field that only the GPU branch fills. XLA104's unsafe fix of the lone
`torch.cuda.is_available()` (treated as True on XLA) takes the GPU branch of the format
and not of the values: KeyError 'memory'. The device choice is ported safely, and the
original runs on the CPU (CUDA hidden), so `--compare --unsafe-fixes` sees the fixed
run crash where the port ran, and `--bisect` names that one fix."""

import torch

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(16, 4)
y = x.sum(dim=1, keepdim=True)

line_format = "step {step} loss {loss:.4f}"
if torch.cuda.is_available():
    line_format += " memory {memory}"

for step in range(30):
    opt.zero_grad()
    loss = ((model(x.to(device)) - y.to(device)) ** 2).mean()
    loss.backward()
    opt.step()
    if step % 2 == 1:
        print(line_format.format(step=step, loss=loss.item()))
