"""Issue 10, item 1: a pytorch/examples-style loop whose `--dry-run` breaks after one step.

The step logs with `.item()` (XLA102 moves it into a step closure) and has no sync
(XLA103 adds one). The sync must also come before the `break`: otherwise, with
`--dry-run`, the step never syncs, the closure never prints, and `torch.save`
traces the whole unsynced graph.
"""

import argparse
import io

import torch
import torch_xla


def train(args, model, device, batches, optimizer):
    model.train()
    for batch_idx, (data, target) in enumerate(batches):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        print(f"batch {batch_idx} loss {loss.item():.4f}")
        if args.dry_run:
            break


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch.nn.Linear(8, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(4)]
    train(args, model, device, batches, optimizer)
    torch.save(model.state_dict(), io.BytesIO())
    print("saved")


if __name__ == "__main__":
    main()
