"""A DDPM-style script ported to XLA (issue 28): the optimizer is built from the
denoiser's parameters, then the denoiser is moved inside the diffusion module that holds
it. Moving the wrapper moves the denoiser, so the optimizer steps the old CPU parameters."""

import torch
import torch_xla
from torch import nn


class Denoiser(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 1, 32), nn.Tanh(), nn.Linear(32, dim))

    def forward(self, x, t):
        return self.net(torch.cat([x, t[:, None]], dim=1))


class DiffusionTrainer(nn.Module):
    def __init__(self, model, beta_1, beta_T, T):
        super().__init__()
        self.model = model
        self.T = T
        self.register_buffer("betas", torch.linspace(beta_1, beta_T, T))
        alphas_bar = torch.cumprod(1.0 - self.betas, dim=0)
        self.register_buffer("sqrt_alphas_bar", torch.sqrt(alphas_bar))
        self.register_buffer("sqrt_one_minus_alphas_bar", torch.sqrt(1.0 - alphas_bar))

    def forward(self, x_0, t, noise):
        x_t = self.sqrt_alphas_bar[t, None] * x_0 + self.sqrt_one_minus_alphas_bar[t, None] * noise
        return nn.functional.mse_loss(self.model(x_t, t.float() / self.T), noise)


def main():
    torch.manual_seed(0)
    device = torch_xla.device()
    net_model = Denoiser(8)
    optim = torch.optim.Adam(net_model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lr_lambda=lambda step: 1.0)
    trainer = DiffusionTrainer(net_model, 1e-4, 0.02, 100).to(device)
    # One fixed batch, timesteps and noise: the loss can only change through training.
    x_0 = torch.randn(64, 8).to(device)
    t = torch.randint(0, 100, (64,)).to(device)
    noise = torch.randn(64, 8).to(device)
    first = None
    for _step in range(6):
        optim.zero_grad()
        loss = trainer(x_0, t, noise)
        loss.backward()
        optim.step()
        sched.step()
        torch_xla.sync()
        if first is None:
            first = loss.detach()
    print(f"loss {first.item():.4f} -> {loss.item():.4f}")


if __name__ == "__main__":
    main()
