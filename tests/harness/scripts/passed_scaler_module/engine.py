"""DeiT's engine.py in small (issue 38): the training loop calls the loss scaler its
caller passes (`main.py` builds it); nothing here says that call runs the backward."""

import math
import sys

import torch


def train_one_epoch(model, data_loader, optimizer, device, loss_scaler):
    for step, (samples, targets) in enumerate(data_loader):
        loss = torch.nn.functional.mse_loss(model(samples.to(device)), targets.to(device))
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            sys.exit(1)
        optimizer.zero_grad()
        loss_scaler(loss, optimizer, parameters=model.parameters())
        print(f"step {step} loss {loss_value:.4f}")
