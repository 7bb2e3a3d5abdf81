"""A small nanoGPT-style trainer with gradient accumulation, already on XLA: the
micro-step loop calls `backward()` and syncs, the optimizer steps in the loop around it,
and every optimizer step reads the accumulated loss and the gradient norm on the host
(`loss_accum.item()`, an f-string of the norm) and adds the loss to a running sum with
`.item()`: XLA102's step closure and `.detach()` fixes apply there."""

import torch
import torch_xla
from transformers import GPT2Config, GPT2LMHeadModel

device = torch_xla.device()
torch.manual_seed(1337)

config = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=32, n_positions=8, tie_word_embeddings=False)
model = GPT2LMHeadModel(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
grad_accum_steps = 2
max_iters = 5
log_interval = 2
data = torch.randint(0, 32, ((max_iters * grad_accum_steps + 1) * 4, 8))


def get_batch(i):
    x = data[i * 4 : (i + 1) * 4]
    return x.to(device), x.to(device)


running = 0.0
batch = 0
X, Y = get_batch(batch)
for iter_num in range(max_iters):
    loss_accum = 0.0
    for _ in range(grad_accum_steps):
        logits = model(X).logits
        loss = torch.nn.functional.cross_entropy(logits.view(-1, 32), Y.view(-1))
        loss = loss / grad_accum_steps
        loss_accum += loss.detach()
        batch += 1
        X, Y = get_batch(batch)
        loss.backward()
        torch_xla.sync()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"iter {iter_num}: loss {loss_accum.item():.4f}, norm {norm:.4f}")
    running += loss_accum.item()
    if iter_num % log_interval == 0:
        print(f"iter {iter_num}: micro-batch loss {loss.item() * grad_accum_steps:.4f}")
torch_xla.sync()
print(f"mean loss {running / max_iters:.4f}")
print(f"model on {next(model.parameters()).device}")
