"""Metric helpers, as research code keeps them in utils/."""

import torch


class AverageMeter:
    """Keeps whatever it is given: a GPU tensor stays a GPU tensor (no sync)."""

    def __init__(self):
        self.sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n


class ItemMeter:
    def __init__(self):
        self.sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        if isinstance(val, torch.Tensor):
            val = val.item()
        self.sum += val * n
        self.count += n


def accuracy(output, target):
    correct = output.argmax(1) == target
    return correct.float().sum().item() / target.size(0)


def log_scalars(writer, loss, step):
    writer.add_scalar("train/loss", loss, step)


def loss_text(loss):
    return "loss {:.4f}".format(loss)


def percent_text(loss):
    return "loss %.4f" % loss


def report(loss, step, every=50):
    if step % every == 0:
        print(f"step {step}: {loss.item():.4f}")


def lr_text(lr, step):
    return "lr {} at step {}".format(lr, step)
