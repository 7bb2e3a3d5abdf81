"""A DDP script for torchrun that asserts CUDA before it sets up its process group."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

assert torch.cuda.is_available(), "this script trains on GPUs"
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group(backend="nccl")
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1).to(local_rank), device_ids=[local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn(16, 4).to(local_rank)
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
print(f"rank {dist.get_rank()} final loss {loss.item():.4f}")
print(f"model on {next(model.parameters()).device}")
dist.destroy_process_group()
