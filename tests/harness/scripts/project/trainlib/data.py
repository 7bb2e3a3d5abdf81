import torch


def batches(steps):
    for _ in range(steps):
        x = torch.randn(8, 4)
        yield x, x.sum(dim=1, keepdim=True)
