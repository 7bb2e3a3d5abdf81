"""pytorch/examples' word_language_model main.py, ported to XLA and small (issue 28):
`model.RNNModel(..., args.tied).to(device)` moves the tied model built in model.py."""

import argparse

import model
import torch
import torch.nn.functional as F
import torch_xla

parser = argparse.ArgumentParser()
parser.add_argument("--tied", action="store_true", default=True)
args = parser.parse_args()

torch.manual_seed(0)
device = torch_xla.device()
ntokens = 50
model = model.RNNModel("LSTM", ntokens, 16, 16, 1, 0.0, args.tied).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
# One fixed batch (sequence first, as the word LM batches): the loss changes only by training.
data = torch.randint(0, ntokens, (9, 4)).to(device)
first = None
for _step in range(6):
    hidden = (torch.zeros(1, 4, 16, device=device), torch.zeros(1, 4, 16, device=device))
    optimizer.zero_grad()
    output, hidden = model(data[:-1], hidden)
    loss = F.nll_loss(output, data[1:].reshape(-1))
    loss.backward()
    optimizer.step()
    torch_xla.sync()
    if first is None:
        first = loss.detach()
print(f"loss {first.item():.4f} -> {loss.item():.4f}")
tied = model.decoder.weight is model.encoder.weight
print("parameters", len(list(model.parameters())), "tied", tied)
