"""In the style of PyTorch's AMP recipe (pytorch/tutorials, "Automatic Mixed Precision"):
the scaler is built twice, once per section, and saved in a checkpoint.

On XLA the CUDA GradScaler stays enabled and forces a host sync every step; the port
removes both scalers and every use (XLA104, unsafe), autocasts to bfloat16, and keeps
`device` a string because it is also autocast's `device_type`.
"""

import torch

device = "cuda"
torch.manual_seed(0)
batch_size, in_size, out_size, steps = 16, 32, 8, 4


def make_model():
    layers = [torch.nn.Linear(in_size, 64), torch.nn.ReLU(), torch.nn.Linear(64, out_size)]
    return torch.nn.Sequential(*layers).cuda()


data = [torch.randn(batch_size, in_size, device=device) for _ in range(steps)]
targets = [torch.randn(batch_size, out_size, device=device) for _ in range(steps)]
loss_fn = torch.nn.MSELoss().cuda()

# Adding GradScaler: one scaler, built at the start of the run.
net = make_model()
opt = torch.optim.SGD(net.parameters(), lr=0.001)
scaler = torch.amp.GradScaler("cuda")
for input, target in zip(data, targets):
    with torch.autocast(device_type=device, dtype=torch.float16):
        output = net(input)
        loss = loss_fn(output, target)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad()

# All together: a second scaler, with gradient clipping.
use_amp = True
net = make_model()
opt = torch.optim.SGD(net.parameters(), lr=0.001)
scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
for input, target in zip(data, targets):
    with torch.autocast(device_type=device, dtype=torch.float16, enabled=use_amp):
        output = net(input)
        loss = loss_fn(output, target)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=0.1)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)

# Saving/resuming.
checkpoint = {"model": net.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict()}
net.load_state_dict(checkpoint["model"])
opt.load_state_dict(checkpoint["optimizer"])
scaler.load_state_dict(checkpoint["scaler"])
print(f"final loss {loss.item():.4f}")
