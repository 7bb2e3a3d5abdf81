"""XLA104 cuda-device: a CUDA training script, as written for a GPU.

It picks `cuda` when available, moves the model with `.cuda()`, seeds CUDA, trains
with `torch.cuda.amp.autocast()` and a `torch.cuda.amp.GradScaler()`, synchronizes,
empties the CUDA cache and saves a checkpoint. None of that runs on torch_xla (2.9
has no XLA:CUDA and no XLA GradScaler), and the loop has no sync either (XLA103).
Expect `xlalint check` to flag every CUDA call (XLA104) and the loop (XLA103);
`xlalint fix --unsafe-fixes` ports it: `torch_xla.device()`, `torch_xla.manual_seed`,
`xm.wait_device_ops()`, bf16 `torch.autocast("xla")` without the scaler, and a
`torch_xla.sync()` per step.

`xlalint run --compare --unsafe-fixes examples/cuda_port.py` cannot run the original on
XLA, so its baseline is the original with only the XLA104 fixes: with no sync, each
epoch's steps pile up into one graph that runs at the epoch's `loss.item()`; the fixed
copy runs one small, reused graph per step.

Unfixed, it needs a CUDA GPU (or falls back to the CPU where `.cuda()` fails).
"""

import os
import tempfile

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 2
BATCH_SIZE = 32


class Classifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU())
        self.head = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.body(x))


def main() -> None:
    torch.manual_seed(0)
    torch.cuda.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    features = torch.randn(96, 20)
    labels = (features[:, 0] > 0).long() + (features[:, 1] > 0).long()
    loader = DataLoader(
        TensorDataset(features, labels),
        batch_size=BATCH_SIZE,
        shuffle=True,
        drop_last=True,
        generator=torch.Generator().manual_seed(0),
    )

    model = Classifier().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.cuda.amp.GradScaler()

    for epoch in range(EPOCHS):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        torch.cuda.synchronize()
        print(f"epoch {epoch} loss {loss.item():.4f}")

    torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as checkpoint_dir:
        path = os.path.join(checkpoint_dir, "checkpoint.pt")
        torch.save(model.state_dict(), path)
        print(f"saved {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
