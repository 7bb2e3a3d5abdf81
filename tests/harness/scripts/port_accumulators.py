"""Issue 10, item 3: running sums of `.item()`.

`total_loss` is read only after the loop: its `.item()` may become `.detach()`.
`running` is read on every step (the `history` of averages) and `state.tokens_seen`
is an attribute written to JSON: both must keep their `.item()`.
"""

import json
import types

import torch
import torch_xla


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch.nn.Linear(8, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(6)]
    state = types.SimpleNamespace(tokens_seen=0)
    history = []
    total_loss = 0.0
    running = 0.0
    for step, (x, y) in enumerate(batches):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
        running += loss.item()
        state.tokens_seen += (y >= 0).sum().item()
        history.append(running / (step + 1))
        torch_xla.sync()
    print(f"mean loss {total_loss / len(batches):.4f}")
    print(json.dumps({"last_average": history[-1], **vars(state)}))


if __name__ == "__main__":
    main()
