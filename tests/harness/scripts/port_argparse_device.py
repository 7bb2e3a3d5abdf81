"""A small GPT-style trainer that takes its device from the command line (issue 21): the
default is chosen through CUDA, the script reads `args.device` as a string (a device type
for autocast derived from it, `.startswith`) and moves the model and the data there. A
device default of `torch_xla.device()` would break the string reads and start the XLA
runtime at import time."""

import argparse
from contextlib import nullcontext

import torch
from transformers import GPT2Config, GPT2LMHeadModel

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

device_type = "cuda" if "cuda" in args.device else "cpu"
ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type, dtype=torch.bfloat16)
if args.device.startswith("cuda"):
    torch.backends.cudnn.benchmark = True

torch.manual_seed(1337)
config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
model = GPT2LMHeadModel(config).to(args.device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randint(0, 64, (48, 16))
for step in range(args.steps):
    x = data[step * 8 : (step + 1) * 8].to(args.device)
    with ctx:
        logits = model(x).logits
    loss = torch.nn.functional.cross_entropy(logits.float().view(-1, 64), x.view(-1))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if step % 2 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
print(f"final loss {loss.item():.4f}")
print(f"model on {next(model.parameters()).device}, autocast {device_type}, logits {logits.dtype}")
