"""A project whose training loop lives in a sibling module and a package: the CUDA
calls and the missing sync are in `train_loop.py`, which this script imports."""

import os

import torch
from train_loop import train
from trainlib import read_steps

HERE = os.path.dirname(os.path.abspath(__file__))
device = torch.device("cuda")
model = train(read_steps(os.path.join(HERE, "steps.txt")), device)
print("model on", next(model.parameters()).device)
