"""ImageNet-style ResNet-50 training on synthetic images whose per-sample CPU work (decode, crop, flip,
normalize in numpy) stands in for JPEG decoding; written the way many classification scripts are."""

import argparse

import numpy as np
import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader, Dataset

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class DecodedImages(Dataset):
    def __init__(self, length, size, classes):
        self.length, self.size, self.classes = length, size, classes

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        rng = np.random.default_rng(index)
        raw = rng.integers(0, 256, (self.size + 32, self.size + 32, 3), dtype=np.uint8)  # the "decoded" JPEG
        top, left = rng.integers(0, 32, 2)
        image = raw[top:top + self.size, left:left + self.size].astype(np.float32) / 255.0
        if rng.random() < 0.5:
            image = image[:, ::-1]
        image = (image - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), int(rng.integers(self.classes))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torchvision.models.resnet50(num_classes=1000).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    dataset = DecodedImages(50_000, args.image_size, 1000)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)

    model.train()
    step = 0
    for epoch in range(90):
        for images, target in loader:
            images = images.to(device)
            target = target.to(device)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
            step += 1
            if step == args.steps:
                return


if __name__ == "__main__":
    main()
