"""A CUDA training loop that prints the GPU memory it used after each epoch."""

import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(64, 8)
for epoch in range(2):
    for start in range(0, 64, 16):
        x = data[start : start + 16].to(device)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"loss {loss.item():.4f}")
    print(f"epoch {epoch} peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
    torch.cuda.reset_peak_memory_stats()
print(f"model on {next(model.parameters()).device}")
