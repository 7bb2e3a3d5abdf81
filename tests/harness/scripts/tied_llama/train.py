"""Trains the tied Transformer of model.py on the XLA device (llama2.c's train.py,
ported): moving the model unties its weights unless they are tied again after it."""

import torch
import torch.nn.functional as F
import torch_xla
from model import ModelArgs, Transformer


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    model = Transformer(ModelArgs())
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    # One fixed batch: the loss can only change through training.
    tokens = torch.randint(0, 64, (4, 16)).to(device)
    first = None
    for _step in range(6):
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        torch_xla.sync()
        if first is None:
            first = loss.detach()
    print(f"loss {first.item():.4f} -> {loss.item():.4f}")
    tied = model.output.weight is model.tok_embeddings.weight
    print("parameters", len(list(model.parameters())), "tied", tied)


if __name__ == "__main__":
    main()
