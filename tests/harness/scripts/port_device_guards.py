"""A small trainer whose device is a string tested against "cuda" (build-nanogpt's way):
the step timing waits for the device under `if device_type == "cuda":`, and the batch
loader pins memory under the same test (nanoGPT's way), which only CUDA can."""

import time

import torch

device = "cpu"
if torch.cuda.is_available():
    device = "cuda"
device_type = "cuda" if device.startswith("cuda") else "cpu"


def get_batch(data, step):
    x = data[step * 8 : (step + 1) * 8]
    if device_type == "cuda":
        x = x.pin_memory().to(device, non_blocking=True)
    else:
        x = x.to(device)
    return x


torch.manual_seed(1337)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(48, 16)
for step in range(6):
    t0 = time.time()
    loss = model(get_batch(data, step)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if device_type == "cuda":
        torch.cuda.synchronize()
        print(f"step {step}: waited for the device")
    dt = time.time() - t0
print(f"final loss {loss.item():.4f}")
print(f"model on {next(model.parameters()).device}, device type {device_type}")
