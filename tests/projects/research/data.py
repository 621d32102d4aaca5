"""Synthetic image data: the loaders the training script asks for (no device code here)."""

import torch
from torch.utils.data import DataLoader, Dataset


class RandomImages(Dataset):
    def __init__(self, size: int) -> None:
        self.images = torch.randn(size, 3, 32, 32)
        self.labels = torch.randint(0, 10, (size,))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index):
        return self.images[index].flip(-1) if torch.rand(()) < 0.5 else self.images[index], self.labels[index]  # a random flip


def make_loaders(batch_size: int = 64, workers: int = 4):
    train = DataLoader(RandomImages(1024), batch_size=batch_size, shuffle=True, num_workers=workers)
    val = DataLoader(RandomImages(256), batch_size=batch_size, num_workers=workers, pin_memory=True)
    return train, val
