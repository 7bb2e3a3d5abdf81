"""Issue 21 item 6: a random generator made on the training device. Once the port makes
that device XLA, `torch.Generator(device=...)` raises ("XLA device type not an
accelerator"): the generator has to stay on the CPU, where it shuffles the batches."""

import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator(device=device)
g.manual_seed(0)
model = torch.nn.Linear(8, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(64, 8)
target = data.sum(1, keepdim=True)
for epoch in range(3):
    order = torch.randperm(64, generator=g)
    for i in range(0, 64, 16):
        idx = order[i : i + 16]
        x, y = data[idx].to(device), target[idx].to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
print(f"model on {next(model.parameters()).device}, generator on {g.device}")
