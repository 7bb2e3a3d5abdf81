"""A regression ported to XLA whose optimizer is given parameter groups taken before the
model moves (XLA501, issue 33): the fix must move the model above the groups."""

import torch
import torch_xla
from torch import nn


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Tanh(), nn.Linear(16, 1))
    no_decay = ["bias", "1.weight"]
    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
            "weight_decay": 0.01,
        },
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=0.05)
    model = model.to(device)
    x = torch.randn(32, 8).to(device)
    y = x.sum(dim=1, keepdim=True)
    first = None
    for _step in range(6):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        if first is None:
            first = loss.detach()
    print(f"loss {first.item():.4f} -> {loss.item():.4f}")


if __name__ == "__main__":
    main()
