"""Image models of the Lucid and Gavel profiles, written from the papers' architecture tables
(torchvision is not installable here).  Each ``build_*`` returns (module, example inputs)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn


def _bn_conv(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: Any = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ----------------------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    """Two 3x3 convs with identity (or 1x1 projection) shortcut (He et al. 2016)."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(_bn_conv(cin, planes, 3, stride), _bn_conv(planes, planes, 3, act=None))
        self.short = (nn.Sequential() if stride == 1 and cin == planes
                      else _bn_conv(cin, planes, 1, stride, act=None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (stride here, as in torchvision v1.5), 1x1 expand x4."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        out = planes * 4
        self.body = nn.Sequential(_bn_conv(cin, planes, 1), _bn_conv(planes, planes, 3, stride),
                                  _bn_conv(planes, out, 1, act=None))
        self.short = nn.Sequential() if stride == 1 and cin == out else _bn_conv(cin, out, 1, stride, act=None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.short(x))


class ResNet(nn.Module):
    """ImageNet stem (7x7/2 + maxpool) or CIFAR stem (3x3/1, no pool)."""

    def __init__(self, block: Any, layers: list[int], classes: int, cifar: bool) -> None:
        super().__init__()
        self.stem = (_bn_conv(3, 64, 3) if cifar else
                     nn.Sequential(_bn_conv(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1)))
        blocks: list[nn.Module] = []
        cin = 64
        for i, n in enumerate(layers):
            planes = 64 * 2 ** i
            for j in range(n):
                blocks.append(block(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def build_resnet18_cifar() -> tuple[nn.Module, tuple]:
    return ResNet(BasicBlock, [2, 2, 2, 2], 10, cifar=True), (torch.randn(2, 3, 32, 32),)


def build_resnet50() -> tuple[nn.Module, tuple]:
    return ResNet(Bottleneck, [3, 4, 6, 3], 1000, cifar=False), (torch.randn(2, 3, 224, 224),)


# ----------------------------------------------------------------------------- VGG
VGG_CFG = {"vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
           "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]}


class VGGCifar(nn.Module):
    """VGG with BatchNorm for 32x32 inputs and a single linear classifier (CIFAR variant)."""

    def __init__(self, cfg: list, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU()]
                cin = v
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


def build_vgg11_cifar() -> tuple[nn.Module, tuple]:
    return VGGCifar(VGG_CFG["vgg11"]), (torch.randn(2, 3, 32, 32),)


# ----------------------------------------------------------------------------- MobileNetV2
class InvertedResidual(nn.Module):
    """Expand 1x1 -> depthwise kxk -> (SE) -> project 1x1; residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, mid: int, k: int = 3, act: Any = nn.ReLU6,
                 se: int = 0, se_gate: Any = nn.Hardsigmoid) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if mid != cin:
            layers.append(_bn_conv(cin, mid, 1, act=act))
        layers.append(_bn_conv(mid, mid, k, stride, groups=mid, act=act))
        if se:
            layers.append(SqueezeExcite(mid, se, se_gate))
        layers.append(_bn_conv(mid, cout, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class SqueezeExcite(nn.Module):
    """Channel attention: global pool -> FC (1x1 conv) -> act -> FC -> gate -> scale."""

    def __init__(self, ch: int, squeeze: int, gate: Any, act: Any = nn.ReLU) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(ch, squeeze, 1), act(),
                               nn.Conv2d(squeeze, ch, 1), gate())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.f(x)


class MobileNetV2Cifar(nn.Module):
    """MobileNetV2 (Sandler et al.) with the CIFAR changes: stride-1 stem and second stage."""

    CFG: ClassVar[list[tuple[int, ...]]] = [(1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [_bn_conv(3, 32, 3, act=nn.ReLU)]
        cin = 32
        for t, c, n, s in self.CFG:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, cin * t, act=nn.ReLU))
                cin = c
        layers += [_bn_conv(320, 1280, 1, act=nn.ReLU), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


def build_mobilenet_v2_cifar() -> tuple[nn.Module, tuple]:
    return MobileNetV2Cifar(), (torch.randn(2, 3, 32, 32),)


# ----------------------------------------------------------------------------- MobileNetV3-Large
def _div8(v: float) -> int:
    return max(8, int(v + 4) // 8 * 8)


class MobileNetV3Large(nn.Module):
    """MobileNetV3-Large for ImageNet (Howard et al. 2019, Table 1)."""

    # kernel, expanded channels, out, squeeze-excite, hard-swish, stride
    CFG: ClassVar[list[tuple[int, ...]]] = [(3, 16, 16, 0, 0, 1), (3, 64, 24, 0, 0, 2), (3, 72, 24, 0, 0, 1), (5, 72, 40, 1, 0, 2),
           (5, 120, 40, 1, 0, 1), (5, 120, 40, 1, 0, 1), (3, 240, 80, 0, 1, 2), (3, 200, 80, 0, 1, 1),
           (3, 184, 80, 0, 1, 1), (3, 184, 80, 0, 1, 1), (3, 480, 112, 1, 1, 1), (3, 672, 112, 1, 1, 1),
           (5, 672, 160, 1, 1, 2), (5, 960, 160, 1, 1, 1), (5, 960, 160, 1, 1, 1)]

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [_bn_conv(3, 16, 3, 2, act=nn.Hardswish)]
        cin = 16
        for k, exp, out, se, hs, s in self.CFG:
            layers.append(InvertedResidual(cin, out, s, exp, k,
                                           act=nn.Hardswish if hs else nn.ReLU, se=_div8(exp / 4) if se else 0))
            cin = out
        layers += [_bn_conv(160, 960, 1, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(960, 1280), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def build_mobilenet_v3_large() -> tuple[nn.Module, tuple]:
    return MobileNetV3Large(), (torch.randn(2, 3, 224, 224),)


# ----------------------------------------------------------------------------- EfficientNet-B0
class MBConv(nn.Module):
    """EfficientNet block: expand, depthwise, SE (ratio 0.25 of the input), project, skip."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        mid = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(_bn_conv(cin, mid, 1, act=nn.SiLU))
        layers += [_bn_conv(mid, mid, k, stride, groups=mid, act=nn.SiLU),
                   SqueezeExcite(mid, max(1, int(cin * 0.25)), nn.Sigmoid, nn.SiLU),
                   _bn_conv(mid, cout, 1, act=None)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class EfficientNetB0Cifar(nn.Module):
    """EfficientNet-B0 (Tan & Le 2019) stages; CIFAR variant with a stride-1 stem."""

    # expand, out, repeats, kernel, stride
    CFG: ClassVar[list[tuple[int, ...]]] = [(1, 16, 1, 3, 1), (6, 24, 2, 3, 2), (6, 40, 2, 5, 2), (6, 80, 3, 3, 2), (6, 112, 3, 5, 1),
           (6, 192, 4, 5, 2), (6, 320, 1, 3, 1)]

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [_bn_conv(3, 32, 3, 1, act=nn.SiLU)]
        cin = 32
        for e, c, n, k, s in self.CFG:
            for i in range(n):
                layers.append(MBConv(cin, c, k, s if i == 0 else 1, e))
                cin = c
        layers.append(nn.AdaptiveAvgPool2d(1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(320, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


def build_efficientnet_b0_cifar() -> tuple[nn.Module, tuple]:
    return EfficientNetB0Cifar(), (torch.randn(2, 3, 32, 32),)
