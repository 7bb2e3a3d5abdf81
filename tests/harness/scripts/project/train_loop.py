import os

import torch
from trainlib.data import batches
from trainlib.model import make_model

# Read next to this file: its fixed copy must still find it.
with open(os.path.join(os.path.dirname(__file__), "lr.txt")) as lr_file:
    LR = float(lr_file.read())


def train(steps, device):
    torch.manual_seed(0)
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for x, y in batches(steps):
        x, y = x.cuda(), y.cuda()
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item():.4f}")
    return model
