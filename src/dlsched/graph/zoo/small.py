"""Small MLP-style workloads: NeuMF, PPO and TD3 policies, A3C, and the VAE-CF recommender."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn


class NeuMF(nn.Module):
    """Neural matrix factorisation (He et al. 2017) on MovieLens-1M: GMF + MLP towers, factor 8."""

    def __init__(self, users: int = 6040, items: int = 3706, factor: int = 8, layers: int = 3) -> None:
        super().__init__()
        mlp_dim = factor * 2 ** (layers - 1)
        self.u_gmf, self.i_gmf = nn.Embedding(users, factor), nn.Embedding(items, factor)
        self.u_mlp, self.i_mlp = nn.Embedding(users, mlp_dim), nn.Embedding(items, mlp_dim)
        mods: list[nn.Module] = []
        width = mlp_dim * 2
        for _ in range(layers):
            mods += [nn.Linear(width, width // 2), nn.ReLU()]
            width //= 2
        self.mlp = nn.Sequential(*mods)
        self.out = nn.Linear(factor * 2, 1)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        gmf = self.u_gmf(user) * self.i_gmf(item)
        mlp = self.mlp(torch.cat([self.u_mlp(user), self.i_mlp(item)], -1))
        return self.out(torch.cat([gmf, mlp], -1)).squeeze(-1)


def build_neumf() -> tuple[nn.Module, tuple]:
    return NeuMF(), (torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long))


def _mlp(sizes: list[int], act: type[nn.Module]) -> nn.Sequential:
    mods: list[nn.Module] = []
    for a, b in pairwise(sizes):
        mods += [nn.Linear(a, b), act()]
    return nn.Sequential(*mods)


class PPOPolicy(nn.Module):
    """stable-baselines3 MlpPolicy for LunarLander (obs 8, 4 actions): separate 64-64 tanh nets."""

    def __init__(self, obs: int = 8, actions: int = 4) -> None:
        super().__init__()
        self.pi, self.vf = _mlp([obs, 64, 64], nn.Tanh), _mlp([obs, 64, 64], nn.Tanh)
        self.action, self.value = nn.Linear(64, actions), nn.Linear(64, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.action(self.pi(obs)), self.value(self.vf(obs))


def build_ppo_lunarlander() -> tuple[nn.Module, tuple]:
    return PPOPolicy(), (torch.randn(2, 8),)


class TD3Nets(nn.Module):
    """stable-baselines3 TD3 for BipedalWalker (obs 24, act 4): actor 400-300 and twin critics."""

    def __init__(self, obs: int = 24, act: int = 4) -> None:
        super().__init__()
        self.actor = nn.Sequential(_mlp([obs, 400, 300], nn.ReLU), nn.Linear(300, act), nn.Tanh())
        self.q1 = nn.Sequential(_mlp([obs + act, 400, 300], nn.ReLU), nn.Linear(300, 1))
        self.q2 = nn.Sequential(_mlp([obs + act, 400, 300], nn.ReLU), nn.Linear(300, 1))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        sa = torch.cat([obs, action], 1)
        return self.actor(obs), self.q1(sa), self.q2(sa)


def build_td3_bipedalwalker() -> tuple[nn.Module, tuple]:
    return TD3Nets(), (torch.randn(2, 24), torch.randn(2, 4))


class A3CPong(nn.Module):
    """A3C actor-critic for Atari Pong on 42x42 frames: 4 conv(32, 3x3/2) + ELU, LSTMCell(256)."""

    def __init__(self, actions: int = 6) -> None:
        super().__init__()
        mods: list[nn.Module] = []
        cin = 1
        for _ in range(4):
            mods += [nn.Conv2d(cin, 32, 3, 2, 1), nn.ELU()]
            cin = 32
        self.conv = nn.Sequential(*mods)
        self.lstm = nn.LSTMCell(32 * 3 * 3, 256)
        self.critic, self.actor = nn.Linear(256, 1), nn.Linear(256, actions)

    def forward(self, x: torch.Tensor, hx: torch.Tensor, cx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        hx, cx = self.lstm(torch.flatten(self.conv(x), 1), (hx, cx))
        return self.critic(hx), self.actor(hx), hx, cx


def build_a3c_pong() -> tuple[nn.Module, tuple]:
    return A3CPong(), (torch.randn(2, 1, 42, 42), torch.zeros(2, 256), torch.zeros(2, 256))


class VAECF(nn.Module):
    """Variational autoencoder for collaborative filtering (Liang et al. 2018) on ML-20M:
    items 20108 -> 600 -> 200 (mu, logvar) -> 600 -> items, tanh."""

    def __init__(self, items: int = 20108, hidden: int = 600, latent: int = 200) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(items, hidden), nn.Tanh(), nn.Linear(hidden, 2 * latent))
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.Tanh(), nn.Linear(hidden, items))
        self.latent = latent

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.enc(torch.nn.functional.normalize(x, dim=1))
        mu, logvar = h[:, :self.latent], h[:, self.latent:]
        z = mu + torch.exp(0.5 * logvar)  # reparameterisation with unit noise (deterministic export)
        return torch.log_softmax(self.dec(z), dim=1)


def build_recommendation_vae() -> tuple[nn.Module, tuple]:
    return VAECF(), (torch.rand(2, 20108),)
