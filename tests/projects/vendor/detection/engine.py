"""One epoch of training and evaluation: no device named here, it comes from main.py."""

import torch

from .util.misc import SmoothedValue, loss_value, move_targets, wait_for_gpu


def train_one_epoch(model, criterion, data_loader, optimizer, device, print_freq: int = 10):
    model.train()
    meter = SmoothedValue()
    for step, (images, targets) in enumerate(data_loader):
        images = images.to(device)
        targets = move_targets(targets, device)
        losses = criterion(model(images), targets)
        loss = sum(losses.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        meter.update(loss_value(losses))
        wait_for_gpu()
        if step % print_freq == 0:
            print(f"step {step}: {loss.item():.3f}")


@torch.no_grad()
def evaluate(model, data_loader, device):
    model.eval()
    for images, targets in data_loader:
        outputs = model(images.to(device, non_blocking=True))
        if step_stats(outputs) > 0.5:
            print("confident")


def step_stats(outputs):
    return outputs.mean()
