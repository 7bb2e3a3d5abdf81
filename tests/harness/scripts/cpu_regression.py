"""Like pytorch/examples' regression/main.py: it never moves anything to a device, so
after the fix (XLA103 adds `torch_xla.sync()`) it syncs, but nothing runs on XLA."""

import torch
import torch.nn.functional as F

torch.manual_seed(0)
W_target = torch.randn(4, 1) * 5
b_target = torch.randn(1) * 5


def get_batch(batch_size=32):
    x = torch.randn(batch_size, 4)
    return x, x.mm(W_target) + b_target


fc = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(fc.parameters(), lr=0.01)
for _ in range(10):
    batch_x, batch_y = get_batch()
    opt.zero_grad()
    loss = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss.backward()
    opt.step()
print("weight on", fc.weight.device)
