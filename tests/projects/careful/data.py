"""Loaders as a performance engineer writes them: workers, pinned memory, persistent workers, big batches."""

import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader(batch_size: int = 256) -> DataLoader:
    dataset = TensorDataset(torch.randn(4096, 32), torch.randint(0, 4, (4096,)))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=8, pin_memory=True, persistent_workers=True)
