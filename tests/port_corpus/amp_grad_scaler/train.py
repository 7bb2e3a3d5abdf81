"""Mixed precision training with gradient clipping (the recipe of the AMP docs):
autocast for the forward pass, a GradScaler, unscale before clipping."""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="AMP regression example")
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--max-grad-norm", type=float, default=1.0)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.backends.cudnn.benchmark = True
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
use_amp = True


def make_model(in_size, out_size, num_layers):
    layers = []
    for _ in range(num_layers - 1):
        layers.append(nn.Linear(in_size, in_size))
        layers.append(nn.ReLU())
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


in_size, out_size, num_layers = 64, 8, 3
inputs = torch.randn(args.batch_size * args.steps, in_size)
targets = inputs[:, :out_size].sin() + 0.1 * inputs[:, out_size : 2 * out_size]
loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch_size)

net = make_model(in_size, out_size, num_layers).to(device)
print("device", next(net.parameters()).device)
opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
scheduler = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps)
loss_fn = nn.MSELoss().to(device)

scaler = torch.cuda.amp.GradScaler(enabled=use_amp)

for step, (input, target) in enumerate(loader):
    input = input.to(device, non_blocking=True)
    target = target.to(device, non_blocking=True)
    with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
        output = net(input)
        loss = loss_fn(output, target)
    scaler.scale(loss).backward()

    # Unscales the gradients of optimizer's assigned params in-place
    scaler.unscale_(opt)
    # Since the gradients of optimizer's assigned params are unscaled, clips as usual:
    torch.nn.utils.clip_grad_norm_(net.parameters(), args.max_grad_norm)

    scaler.step(opt)
    scaler.update()
    scheduler.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step} loss {loss.item():.6f}")

print("final scale", scaler.get_scale())
