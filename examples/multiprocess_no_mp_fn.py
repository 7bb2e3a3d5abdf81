"""XLA105 missing-mp-fn: a multi-process XLA script with no `_mp_fn(index)` entry.

The script is written for several XLA processes (`xr.world_size()`,
`xr.global_ordinal()`, a `DistributedSampler`, `xm.optimizer_step` to all-reduce the
gradients) but only has `main()` under `if __name__ == "__main__":`. Launchers that
start such scripts themselves, SageMaker's `pytorchxla` distribution and HF's
`xla_spawn.py`, call a module-level `_mp_fn(index)`, which is missing. Expect
`xlalint check` to flag the `if __name__` line; the safe fix adds
`def _mp_fn(index): main()` right before it.

Run directly, it is one process (world size 1) either way, so
`xlalint run --compare examples/multiprocess_no_mp_fn.py` shows the same numbers for
the original and the fixed copy: the fix changes how the script can be launched, not
what one process does.

Runs on CPU with PJRT_DEVICE=CPU, on synthetic data.
"""

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.parallel_loader as pl
import torch_xla.runtime as xr
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

EPOCHS = 2


def main() -> None:
    torch.manual_seed(0)
    device = torch_xla.device()
    features = torch.randn(512, 24)
    targets = features.sum(dim=1, keepdim=True)
    dataset = TensorDataset(features, targets)
    sampler = DistributedSampler(dataset, num_replicas=xr.world_size(), rank=xr.global_ordinal(), shuffle=True)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler, drop_last=True)
    device_loader = pl.MpDeviceLoader(loader, device)  # a sync per batch

    model = torch.nn.Sequential(torch.nn.Linear(24, 48), torch.nn.ReLU(), torch.nn.Linear(48, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in device_loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            xm.optimizer_step(optimizer)  # all-reduces the gradients, then steps
        xm.master_print(f"epoch {epoch} loss {loss.item():.4f} on {xr.world_size()} process(es)")


if __name__ == "__main__":
    main()
