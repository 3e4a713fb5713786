"""Small PyTorch models for tests/python/model_test.py (importable as `tiny_models:NAME` by
`python3 -m looptool.model --model=...`)."""
import torch


class TwoConvsAndLinear(torch.nn.Module):
    """The issue's tiny model: a strided convolution with a BatchNorm and relu, a convolution
    with a bias and relu, global average pooling and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class EveryKind(torch.nn.Module):
    """One of each layer extract() knows, and some it does not: a stem with padding cropped at
    the far edge, max pooling (-inf padding), a relu fused into a bias-free convolution,
    depthwise, grouped and dilated convolutions, a strided 1x1, a residual add with relu, an
    average pool, a linear over two rows; then a sigmoid, a reflect-padded convolution and a
    LayerNorm, which stay in PyTorch."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False)
        self.stem_bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
        self.plain = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.dw_bn = torch.nn.BatchNorm2d(8)
        self.grouped = torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.down = torch.nn.Conv2d(8, 16, 1, stride=2)
        self.avg = torch.nn.AvgPool2d(2, stride=2)
        self.reflect = torch.nn.Conv2d(16, 4, 3, padding=1, padding_mode="reflect")
        self.norm = torch.nn.LayerNorm(4)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.stem_bn(self.stem(x))))
        y = torch.relu(self.plain(x))
        y = torch.nn.functional.relu6(self.dw_bn(self.dw(y)))
        x = torch.relu(x + self.grouped(y))
        x = self.avg(self.down(x))
        x = torch.sigmoid(x)
        x = self.reflect(x)                      # (1, 4, 2, 2)
        x = self.norm(x.permute(0, 2, 3, 1))     # (1, 2, 2, 4)
        return self.fc(x.reshape(4, 4)[:2])


def two_convs_and_linear() -> torch.nn.Module:
    torch.manual_seed(0)
    m = TwoConvsAndLinear()
    with torch.no_grad():
        m.bn1.running_mean.uniform_(-0.2, 0.2)
        m.bn1.running_var.uniform_(0.5, 1.5)
        m.bn1.weight.uniform_(0.5, 1.5)
        m.bn1.bias.uniform_(-0.2, 0.2)
    return m.eval()


def every_kind() -> torch.nn.Module:
    torch.manual_seed(1)
    m = EveryKind()
    with torch.no_grad():
        for bn in (m.stem_bn, m.dw_bn):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    return m.eval()
