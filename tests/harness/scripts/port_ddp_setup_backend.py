"""A DDP script in the shape of the DDP tutorial (issue 21): `setup()` takes the backend
as a parameter that defaults to NCCL and passes the rank and the world size, and the
device comes from the command line. Run as torchrun starts each process."""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
args = parser.parse_args()


def setup(rank, world_size, backend="nccl"):
    dist.init_process_group(backend, rank=rank, world_size=world_size)


def main():
    setup(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1).to(args.device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        x = torch.randn(16, 4).to(args.device)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
    print(f"rank {dist.get_rank()} final loss {loss.item():.4f}")
    print(f"model on {next(model.parameters()).device}, backend {dist.get_backend()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
