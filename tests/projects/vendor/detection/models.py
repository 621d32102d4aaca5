"""A tiny detector."""

from torch import nn


class Detector(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Conv2d(3, 8, 3)
        self.head = nn.Linear(8, 4)

    def forward(self, images):
        return self.head(self.backbone(images).mean((2, 3)))


def build_model():
    return Detector()
