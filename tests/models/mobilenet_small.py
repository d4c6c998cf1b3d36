"""A small MobileNet written out as torchvision's mobilenet_v3_small is built (torchvision
has no CPU build here): a hardswish stem, inverted residual blocks (1x1 expand, depthwise
3x3 or 5x5, squeeze-and-excitation with hardsigmoid, 1x1 project, a residual add where
the shape allows), a hardswish classifier head with dropout.

A script for `autograd-tui torch` / `check-order` (tests/engine/test_real_models.py); not a
test module. Random weights, seeded input; train mode (BatchNorm batch statistics; the
dropout's mask is drawn once, in the forward pass).
"""

import torch
from torch import nn
from torch.nn import functional as F


def _make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class ConvBNActivation(nn.Sequential):
    def __init__(self, cin, cout, kernel=3, stride=1, groups=1, activation=nn.Hardswish):
        layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups,
                            bias=False),
                  nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
        if activation is not None:
            layers.append(activation(inplace=True))
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    def __init__(self, channels, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x):
        scale = self.fc2(self.activation(self.fc1(self.avgpool(x))))
        return self.scale_activation(scale) * x


class InvertedResidual(nn.Module):
    def __init__(self, cin, kernel, expanded, cout, use_se, activation, stride):
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        layers = []
        if expanded != cin:
            layers.append(ConvBNActivation(cin, expanded, 1, activation=activation))
        layers.append(ConvBNActivation(expanded, expanded, kernel, stride, groups=expanded,
                                       activation=activation))
        if use_se:
            layers.append(SqueezeExcitation(expanded, _make_divisible(expanded // 4)))
        layers.append(ConvBNActivation(expanded, cout, 1, activation=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        out = self.block(x)
        return out + x if self.use_res_connect else out


class MobileNetSmall(nn.Module):
    # (in, kernel, expanded, out, use_se, activation, stride): the first rows of
    # mobilenet_v3_small's table, narrower
    SETTING = ((16, 3, 16, 16, True, nn.ReLU, 2),
               (16, 3, 48, 24, False, nn.ReLU, 2),
               (24, 3, 64, 24, False, nn.ReLU, 1),
               (24, 5, 64, 32, True, nn.Hardswish, 2))

    def __init__(self, num_classes=10, last_channel=64):
        super().__init__()
        layers = [ConvBNActivation(3, 16, 3, stride=2)]
        layers += [InvertedResidual(*row) for row in self.SETTING]
        layers.append(ConvBNActivation(32, 6 * 32, 1))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(6 * 32, last_channel),
                                        nn.Hardswish(inplace=True),
                                        nn.Dropout(p=0.2, inplace=True),
                                        nn.Linear(last_channel, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def main():
    torch.manual_seed(0)
    model = MobileNetSmall()
    x = torch.randn(2, 3, 32, 32)
    return F.cross_entropy(model(x), torch.tensor([3, 8]))
