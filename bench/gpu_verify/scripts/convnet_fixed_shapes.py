"""A small conv net trained on fixed-shape batches made on the GPU, never setting cudnn.benchmark: the only
thing GPU903's fix changes is which convolution algorithms cuDNN picks (measured in isolation)."""

import argparse

import torch
from torch import nn


def convnet(width=64, classes=100):
    def block(cin, cout, k, dilation=1, groups=1):
        pad = dilation * (k - 1) // 2
        return [nn.Conv2d(cin, cout, k, padding=pad, dilation=dilation, groups=groups, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    return nn.Sequential(
        *block(3, width, 7), nn.MaxPool2d(2),
        *block(width, width * 2, 5), *block(width * 2, width * 2, 3, dilation=2), nn.MaxPool2d(2),
        *block(width * 2, width * 4, 3, groups=4), *block(width * 4, width * 4, 3), nn.MaxPool2d(2),
        *block(width * 4, width * 8, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width * 8, classes),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--iters", type=int, default=600)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    model = convnet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, 128, 128, device=device)
    labels = torch.randint(0, 100, (args.batch_size,), device=device)

    for step in range(args.iters):
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
