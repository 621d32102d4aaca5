"""A small convolutional classifier."""

from torch import nn


class Net(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))
