"""Issue 10, items 2 and 5: a long log line in the step, and a user variable named `xm`.

XLA102's step closure must bind only what the step changes (`step`, `seen`, `loss`),
in a small `def` (the line is long), and its import must not take the name `xm`.
"""

import torch
import torch_xla

xm = 5  # the user's own name


def train(model, batches, optimizer, scheduler, device, epoch, prefix):
    seen = 0
    for step, (x, y) in enumerate(batches):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        print(
            f"{prefix} epoch {epoch} step {step} seen {seen} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.4f}"
        )
        seen += len(x)
        torch_xla.sync()
    return seen


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch.nn.Linear(8, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    batches = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(4)]
    for epoch in range(2):
        train(model, batches, optimizer, scheduler, device, epoch, "train")
    print("xm is", xm)


if __name__ == "__main__":
    main()
