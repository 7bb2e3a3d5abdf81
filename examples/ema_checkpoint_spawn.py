"""XLA201 torch-save, XLA203 missing-gradient-allreduce, XLA205 spawn-nprocs: a
script started with `xmp.spawn(..., nprocs=flags.num_cores)` that steps with
`opt.step()` and checkpoints an exponential moving average of its weights each epoch.

- `nprocs` other than 1/None raises under PJRT (XLA205; the default here is 1, which
  runs in this process, so that the original runs too).
- `opt.step()` in a multi-process script steps on each process's own gradients
  (XLA203; the safe fix is `xm.optimizer_step(opt)`).
- The EMA update at the end of an epoch is still pending when `torch.save` copies the
  EMA weights to the host one tensor at a time: one graph per tensor. `xm.save` syncs
  them together (XLA201).

`xlalint run --compare --unsafe-fixes examples/ema_checkpoint_spawn.py` shows the
compilations and host transfers drop. Runs on CPU with PJRT_DEVICE=CPU, synthetic data.
"""

import argparse
import copy
import os
import tempfile

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

STEPS_PER_EPOCH = 20


def make_model():
    layers = []
    for width_in, width_out in [(16, 48), (48, 40), (40, 32), (32, 24), (24, 8)]:
        layers += [torch.nn.Linear(width_in, width_out), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def _mp_fn(index, flags):
    torch.manual_seed(flags.seed)
    device = torch_xla.device()
    model = make_model().to(device)
    ema = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05 * xr.world_size())
    for epoch in range(flags.epochs):
        for _ in range(STEPS_PER_EPOCH):
            x = torch.randn(16, 16, device=device)
            opt.zero_grad()
            loss = (model(x) - x[:, :8]).pow(2).mean()
            loss.backward()
            opt.step()
            torch_xla.sync()
        with torch.no_grad():
            for averaged, current in zip(ema.parameters(), model.parameters()):
                averaged.mul_(0.9).add_(current, alpha=0.1)
        torch.save(ema.state_dict(), os.path.join(flags.out, f"ema{epoch}.pt"))
        xm.master_print(f"epoch {epoch}: EMA saved")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_cores", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    flags = parser.parse_args()
    with tempfile.TemporaryDirectory() as flags.out:
        xmp.spawn(_mp_fn, args=(flags,), nprocs=flags.num_cores)
