"""A synthetic detection dataset and its loader (the vendor-example layout: datasets/ builds, engine trains)."""

import torch
from torch.utils.data import DataLoader, Dataset


class Shapes(Dataset):
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):
        image = torch.rand(3, 64, 64)
        target = {"boxes": torch.rand(4, 4), "labels": torch.randint(0, 3, (4,))}
        return image, target


def collate(batch):
    images, targets = zip(*batch)
    return torch.stack(images), list(targets)


def build_loader(split: str, batch_size: int = 8):
    shuffle = split == "train"
    return DataLoader(Shapes(512), batch_size=batch_size, shuffle=shuffle, collate_fn=collate, num_workers=2)
