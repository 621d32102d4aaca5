"""Helpers that are cheap to call every step, and one-time set-up."""

import torch


def detached(loss):
    return loss.detach()


def log_metrics(step: int, loss, every: int = 50) -> None:
    if step % every == 0:
        print(f"step {step}: {loss.item():.4f}")


def accuracy(output, target):
    return (output.argmax(1) == target).float().mean().item()


def setup(model, device):
    torch.backends.cudnn.benchmark = True
    model.to(device)
    torch.cuda.synchronize()
    return model
