"""Train the classifier: the usual research-code layout (data.py, model.py, utils.py, train.py)."""

import torch
from torch import nn

from data import make_loaders
from model import Net
from utils import accuracy, log_every, to_device


def train_epoch(model, loader, optimizer, criterion, device):
    model.train()
    for step, batch in enumerate(loader):
        images, labels = to_device(batch, device)
        output = model(images)
        loss = criterion(output, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc = accuracy(output, labels)
        log_every(step, loss)
    return acc


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader, val_loader = make_loaders()
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(10):
        train_epoch(model, train_loader, optimizer, criterion, device)


if __name__ == "__main__":
    main()
