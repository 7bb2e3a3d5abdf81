"""A tiny GPT-2 trained on XLA: moving it unties its embeddings (XLA502)."""

import torch
import torch_xla
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=32)
    model = GPT2LMHeadModel(config)
    print("parameters before the move", len(list(model.parameters())))
    model.to(torch_xla.device())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 100, (4, 16)).to(torch_xla.device())
    for _step in range(3):
        optimizer.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        torch_xla.sync()
    tied = model.lm_head.weight is model.transformer.wte.weight
    print("parameters", len(list(model.parameters())), "tied", tied)


if __name__ == "__main__":
    main()
