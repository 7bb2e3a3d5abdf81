"""DeiT's layout in small (issue 38): `train_one_epoch` gets the loss scaler built by
`main()` as an argument, and the scaler's `__call__` runs the backward and the optimizer
step. The loss is read for `math.isfinite` each step, before the backward. Plain PyTorch
on the CPU: `xlalint fix` adds the sync after `loss_scaler(...)`."""

import math
import sys

import torch


class Scaler:
    def __call__(self, loss, optimizer, parameters=None):
        loss.backward()
        if parameters is not None:
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()


def train_one_epoch(model, data_loader, optimizer, device, loss_scaler):
    for step, (samples, targets) in enumerate(data_loader):
        loss = torch.nn.functional.mse_loss(model(samples.to(device)), targets.to(device))
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            sys.exit(1)
        optimizer.zero_grad()
        loss_scaler(loss, optimizer, parameters=model.parameters())
        print(f"step {step} loss {loss_value:.4f}")


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 4)
    data = [(x[i : i + 8], x[i : i + 8].sum(dim=1, keepdim=True)) for i in range(0, 64, 8)]
    loss_scaler = Scaler()
    train_one_epoch(model, data, optimizer, device, loss_scaler)


if __name__ == "__main__":
    main()
