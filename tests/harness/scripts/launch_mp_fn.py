"""A multi-process style script: `_mp_fn(index)` started by `torch_xla.launch`.

On CPU with CPU_NUM_DEVICES=1 the launcher spawns one worker process; the harness
must collect that worker's metrics and map its causes back to this file.
"""

import os
import sys

import torch
import torch_xla
import torch_xla.runtime as xr

STEPS = 3


def _mp_fn(index):
    device = torch_xla.device()
    weight = torch.zeros(4, device=device)
    for _ in range(STEPS):
        weight = weight + torch.ones(4, device=device)
        torch_xla.sync()
    print(f"worker {index} pid {os.getpid()} world {xr.world_size()} sum {weight.sum().item()}")


if __name__ == "__main__":
    print(f"launcher pid {os.getpid()}", file=sys.stderr)
    torch_xla.launch(_mp_fn, args=())
