"""An MNIST-style tutorial that never writes `cuda`: the device comes from `torch.accelerator`."""

import torch
from torch import nn
from torch.utils.data import DataLoader

from dataset import Digits


def train(model, device, loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = nn.functional.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} batch {batch_idx}: loss {loss.item():.6f}")


def main() -> None:
    if torch.accelerator.is_available():
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    loader = DataLoader(Digits(), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.LogSoftmax(1)).to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    for epoch in range(1, 3):
        train(model, device, loader, optimizer, epoch)


if __name__ == "__main__":
    main()
