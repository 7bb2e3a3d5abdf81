"""XLA201 torch-save (and XLA202, XLA204, XLA301): a multi-process-style script that
checkpoints its model with `torch.save` at the end of every epoch.

The loop iterates an `MpDeviceLoader` and steps with `xm.optimizer_step`, so it syncs
at each batch, but the last step of an epoch is still pending when the epoch ends.
`torch.save(model.state_dict(), ...)` then copies the tensors to the host one by one,
and each pending tensor is its own graph to compile and run. `xm.save` syncs all of
them at once and writes on the master only. Expect `xlalint check` to flag the
`torch.save` (XLA201, safe fix), the training `DataLoader` (XLA202: no
`DistributedSampler`; XLA301: no `drop_last=True`, and 1000 samples are not a multiple
of 32) and the model built without a seed (XLA204).

`xlalint run --compare --unsafe-fixes examples/checkpoint_each_epoch.py` shows the
compilations drop. Runs on CPU with PJRT_DEVICE=CPU (one process), on synthetic data.
"""

import os
import tempfile

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3


def _mp_fn(index, out_dir):
    device = torch_xla.device()
    features = torch.randn(1000, 32)
    dataset = TensorDataset(features, (features.sum(dim=1) > 0).long())
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 2),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(EPOCHS):
        for x, y in pl.MpDeviceLoader(loader, device):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            xm.optimizer_step(optimizer)
        torch.save(model.state_dict(), os.path.join(out_dir, f"epoch{epoch}.pt"))
        xm.master_print(f"epoch {epoch} saved")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as out:
        torch_xla.launch(_mp_fn, args=(out,))
