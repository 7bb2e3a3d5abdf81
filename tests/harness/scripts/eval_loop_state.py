"""A small nanoGPT-style trainer on the XLA device: its training loop syncs every step;
its evaluation loop accumulates the loss on the device and prints the running mean on
every batch, with no sync, so each print compiles a graph one batch longer (issue 21
item 6)."""

import torch
import torch_xla
from transformers import GPT2Config, GPT2LMHeadModel

device = torch_xla.device()
torch.manual_seed(1337)
block_size, batch_size, eval_iters = 8, 4, 8
data = torch.randint(0, 32, (256,))


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    return x.to(device)


config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=32, n_positions=block_size)
model = GPT2LMHeadModel(config).to(device)
model.tie_weights()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)


@torch.no_grad()
def evaluate():
    model.eval()
    total = torch.zeros((), device=device)
    for k in range(eval_iters):
        x = get_batch()
        total += model(x, labels=x).loss
        print(f"eval batch {k}: mean loss {total.item() / (k + 1):.4f}")
    model.train()
    return total / eval_iters


for _ in range(2):
    x = get_batch()
    loss = model(x, labels=x).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    torch_xla.sync()
val_loss = evaluate()
print(f"val loss {val_loss.item():.4f} on {next(model.parameters()).device}")
