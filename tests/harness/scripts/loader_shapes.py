"""Batches of changing width through a torch_xla device loader (MpDeviceLoader).

The loader moves each batch to the device in a background thread; the harness must
record the shapes at the user's loop (`for features, labels in loader`) and name
them after its loop variables.
"""

import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl

WIDTHS = (3, 5, 3, 7)


def main() -> None:
    device = torch_xla.device()
    batches = [(torch.ones(2, width), torch.zeros(2)) for width in WIDTHS]
    total = torch.zeros((), device=device)
    for features, labels in pl.MpDeviceLoader(batches, device):
        total = total + (features * 2).sum() + labels.sum()
        torch_xla.sync()
    print(f"total {total.item():.1f}")


if __name__ == "__main__":
    main()
