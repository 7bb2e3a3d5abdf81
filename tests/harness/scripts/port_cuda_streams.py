"""A CUDA training script that copies each batch on a side stream, ordered against the
step by an event, and trains under a device context."""

import torch

torch.manual_seed(0)
device = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
copy_stream = torch.cuda.Stream()
copied = torch.cuda.Event()
batches = [torch.randn(16, 4) for _ in range(6)]

for batch in batches:
    copy_stream.wait_stream(torch.cuda.current_stream())
    # the copy overlaps the previous step
    with torch.cuda.stream(copy_stream):  # on the side stream
        x = batch.to(device, non_blocking=True)
        y = x.sum(dim=1, keepdim=True)
    copied.record(copy_stream)
    torch.cuda.current_stream().wait_event(copied)
    x.record_stream(torch.cuda.current_stream())
    y.record_stream(torch.cuda.current_stream())
    with torch.cuda.device(0), torch.enable_grad():
        loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
copy_stream.synchronize()
print("model on", next(model.parameters()).device)
print(f"final loss {loss.item():.4f}")
