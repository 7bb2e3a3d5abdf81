"""A small GPT-style trainer that chooses its device and dtype as strings (nanoGPT's way):
the device string is also read (`"cuda" in device`), a `device_type` derived from it feeds
`torch.autocast`, the dtype is chosen through CUDA and decides the GradScaler, and the
CUDA seed sits under an availability guard."""

from contextlib import nullcontext

import torch
from transformers import GPT2Config, GPT2LMHeadModel

device = "cuda" if torch.cuda.is_available() else "cpu"
device_type = "cuda" if "cuda" in device else "cpu"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type, dtype=ptdtype)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))

torch.manual_seed(1337)
if torch.cuda.is_available():
    torch.cuda.manual_seed(1337)

config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
model = GPT2LMHeadModel(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randint(0, 64, (48, 16))
for step in range(6):
    x = data[step * 8 : (step + 1) * 8].to(device)
    with ctx:
        logits = model(x).logits
    loss = torch.nn.functional.cross_entropy(logits.float().view(-1, 64), x.view(-1))
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if step % 2 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
print(f"final loss {loss.item():.4f}")
print(f"model on {next(model.parameters()).device}, autocast {device_type}, dtype {dtype}, logits {logits.dtype}")
