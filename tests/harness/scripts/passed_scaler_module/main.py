"""DeiT's main.py in small (issue 38): `main()` builds the loss scaler, whose `__call__`
runs the backward and the optimizer step, and passes it to `train_one_epoch` of
`engine.py`. Plain PyTorch on the CPU: `xlalint fix` adds the sync after
`loss_scaler(...)` in `engine.py`."""

import torch
from engine import train_one_epoch


class Scaler:
    def __call__(self, loss, optimizer, parameters=None):
        loss.backward()
        if parameters is not None:
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()


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
