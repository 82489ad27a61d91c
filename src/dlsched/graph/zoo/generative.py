"""GANs and point-cloud models of the profiles: DCGAN/LSUN, CycleGAN/monet2photo, PointNet/ShapeNet
(classification, the network Lucid's PointNet job trains, and part segmentation).

A GAN training step runs generator and discriminator(s); the exported graph is that forward
(generator output fed to the discriminator, plus the real batch), so FLOPs cover one step's
forward work."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn


# ----------------------------------------------------------------------------- DCGAN (Radford et al.)
def _dcgan_g(nz: int = 100, ngf: int = 64) -> nn.Sequential:
    chans = [ngf * 8, ngf * 4, ngf * 2, ngf]
    layers: list[nn.Module] = [nn.ConvTranspose2d(nz, chans[0], 4, 1, 0, bias=False), nn.BatchNorm2d(chans[0]), nn.ReLU()]
    for a, b in pairwise(chans):
        layers += [nn.ConvTranspose2d(a, b, 4, 2, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU()]
    layers += [nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)


def _dcgan_d(ndf: int = 64) -> nn.Sequential:
    chans = [ndf, ndf * 2, ndf * 4, ndf * 8]
    layers: list[nn.Module] = [nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2)]
    for a, b in pairwise(chans):
        layers += [nn.Conv2d(a, b, 4, 2, 1, bias=False), nn.BatchNorm2d(b), nn.LeakyReLU(0.2)]
    layers += [nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid()]
    return nn.Sequential(*layers)


class DCGANStep(nn.Module):
    """D(real), D(G(z)) for 64x64 images, nz=100, ngf=ndf=64."""

    def __init__(self) -> None:
        super().__init__()
        self.g, self.d = _dcgan_g(), _dcgan_d()

    def forward(self, z: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.d(real).flatten(1), self.d(self.g(z)).flatten(1)


def build_dcgan() -> tuple[nn.Module, tuple]:
    return DCGANStep(), (torch.randn(2, 100, 1, 1), torch.randn(2, 3, 64, 64))


# ----------------------------------------------------------------------------- CycleGAN (Zhu et al.)
class _ResBlock(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3), nn.InstanceNorm2d(ch), nn.ReLU(),
                               nn.ReflectionPad2d(1), nn.Conv2d(ch, ch, 3), nn.InstanceNorm2d(ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.f(x)


def _cyc_g(ngf: int = 64, blocks: int = 9) -> nn.Sequential:
    layers: list[nn.Module] = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7), nn.InstanceNorm2d(ngf), nn.ReLU()]
    ch = ngf
    for _ in range(2):
        layers += [nn.Conv2d(ch, ch * 2, 3, 2, 1), nn.InstanceNorm2d(ch * 2), nn.ReLU()]
        ch *= 2
    layers += [_ResBlock(ch) for _ in range(blocks)]
    for _ in range(2):
        layers += [nn.ConvTranspose2d(ch, ch // 2, 3, 2, 1, output_padding=1), nn.InstanceNorm2d(ch // 2), nn.ReLU()]
        ch //= 2
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7), nn.Tanh()]
    return nn.Sequential(*layers)


def _cyc_d(ndf: int = 64) -> nn.Sequential:
    """70x70 PatchGAN."""
    layers: list[nn.Module] = [nn.Conv2d(3, ndf, 4, 2, 1), nn.LeakyReLU(0.2)]
    ch = ndf
    for stride in (2, 2, 1):
        layers += [nn.Conv2d(ch, ch * 2, 4, stride, 1), nn.InstanceNorm2d(ch * 2), nn.LeakyReLU(0.2)]
        ch *= 2
    layers.append(nn.Conv2d(ch, 1, 4, 1, 1))
    return nn.Sequential(*layers)


class CycleGANStep(nn.Module):
    """Both generators (forward and cycle passes) and both discriminators, 256x256 images."""

    def __init__(self) -> None:
        super().__init__()
        self.g_ab, self.g_ba, self.d_a, self.d_b = _cyc_g(), _cyc_g(), _cyc_d(), _cyc_d()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        fake_b, fake_a = self.g_ab(a), self.g_ba(b)
        return self.g_ba(fake_b), self.g_ab(fake_a), self.d_b(fake_b), self.d_a(fake_a), self.d_a(a), self.d_b(b)


def build_cyclegan() -> tuple[nn.Module, tuple]:
    return CycleGANStep(), (torch.randn(2, 3, 256, 256), torch.randn(2, 3, 256, 256))


# ----------------------------------------------------------------------------- PointNet (Qi et al.)
def _mlp1d(chans: list[int], last_act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(pairwise(chans)):
        layers += [nn.Conv1d(a, b, 1), nn.BatchNorm1d(b)]
        if last_act or i < len(chans) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class _STN3d(nn.Module):
    """Input transform net: shared MLP, max-pool, FC -> 3x3 matrix (+ identity)."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = _mlp1d([3, 64, 128, 1024])
        self.fc = nn.Sequential(nn.Linear(1024, 512), nn.BatchNorm1d(512), nn.ReLU(),
                                nn.Linear(512, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 9))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.amax(self.mlp(x), dim=2)
        eye = torch.eye(3, dtype=x.dtype).flatten()
        return (self.fc(g) + eye).view(-1, 3, 3)


class PointNetSeg(nn.Module):
    """Part segmentation: per-point 64-d + global 1024-d features -> per-point class scores."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.stn = _STN3d()
        self.mlp1 = _mlp1d([3, 64])
        self.mlp2 = _mlp1d([64, 128, 1024], last_act=False)
        self.head = nn.Sequential(_mlp1d([1088, 512, 256, 128]), nn.Conv1d(128, classes, 1))

    def forward(self, pts: torch.Tensor) -> torch.Tensor:
        n = pts.shape[2]
        x = torch.bmm(pts.transpose(2, 1), self.stn(pts)).transpose(2, 1)
        local = self.mlp1(x)
        g = torch.amax(self.mlp2(local), dim=2, keepdim=True).expand(-1, -1, n)
        return torch.log_softmax(self.head(torch.cat([local, g], 1)), dim=1)


def build_pointnet() -> tuple[nn.Module, tuple]:
    return PointNetSeg(), (torch.randn(2, 3, 2500),)


class PointNetCls(nn.Module):
    """Classification: input transform (3x3 T-Net), shared MLP 3-64-128-1024 (no ReLU after the
    last layer), max-pool to a 1024-d global feature, FC 512-256-k with dropout 0.3 on the 256-d
    layer, log-softmax. No feature transform (64x64 T-Net).

    This is the variant Lucid's PointNet job trains (Hu et al., ASPLOS 2023, ``workloads/pointnet``:
    ``PointNetCls(k=num_classes)`` without ``--feature_transform``, on ShapeNet's part-annotation
    set with ``classification=True``: 2500 points per sample, 16 object categories). The paper's
    network (Qi et al., CVPR 2017) has a 64-64 / 64-128-1024 MLP and the feature transform."""

    def __init__(self, classes: int = 16, dropout: float = 0.3) -> None:
        super().__init__()
        self.stn = _STN3d()
        self.mlp = _mlp1d([3, 64, 128, 1024], last_act=False)
        self.head = nn.Sequential(nn.Linear(1024, 512), nn.BatchNorm1d(512), nn.ReLU(),
                                  nn.Linear(512, 256), nn.Dropout(dropout), nn.BatchNorm1d(256), nn.ReLU(),
                                  nn.Linear(256, classes))

    def forward(self, pts: torch.Tensor) -> torch.Tensor:
        x = torch.bmm(pts.transpose(2, 1), self.stn(pts)).transpose(2, 1)
        return torch.log_softmax(self.head(torch.amax(self.mlp(x), dim=2)), dim=1)


def build_pointnet_cls() -> tuple[nn.Module, tuple]:
    return PointNetCls(), (torch.randn(2, 3, 2500),)
