"""Logging helpers, as vendor examples keep them."""

import torch


class SmoothedValue:
    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def update(self, value: float, n: int = 1) -> None:
        self.total += value * n
        self.count += n


def loss_value(losses: dict):
    return sum(losses.values()).item()


def wait_for_gpu():
    torch.cuda.synchronize()


def move_targets(targets, device):
    return [{k: v.to(device, non_blocking=True) for k, v in t.items()} for t in targets]
