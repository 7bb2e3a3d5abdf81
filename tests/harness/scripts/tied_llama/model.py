"""A llama2.c-style model (issue 28): the embedding and the output layer share one
weight, tied in the model's module; the script beside it moves the model."""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ModelArgs:
    dim: int = 32
    n_layers: int = 1
    vocab_size: int = 64


class Transformer(nn.Module):
    def __init__(self, params: ModelArgs):
        super().__init__()
        self.tok_embeddings = nn.Embedding(params.vocab_size, params.dim)
        self.layers = nn.ModuleList(nn.Linear(params.dim, params.dim) for _ in range(params.n_layers))
        self.norm = nn.LayerNorm(params.dim)
        self.output = nn.Linear(params.dim, params.vocab_size, bias=False)
        # share the unembedding parameters with the embedding parameters
        self.tok_embeddings.weight = self.output.weight

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = torch.relu(layer(h))
        return self.output(self.norm(h))
