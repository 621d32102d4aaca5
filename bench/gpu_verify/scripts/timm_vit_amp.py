"""A timm vision transformer fine-tuned with the pre-2.4 `torch.cuda.amp` API and a tensor dataset augmented
on the fly in the training process (random crop and flip in torch, per sample)."""

import argparse

import timm
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset


class AugmentedImages(Dataset):
    def __init__(self, images, labels, size):
        self.images, self.labels, self.size = images, labels, size

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = self.images[index].float().div_(255)
        top, left = torch.randint(0, image.shape[1] - self.size + 1, (2,)).tolist()
        image = image[:, top:top + self.size, left:left + self.size]
        if torch.rand(()) < 0.5:
            image = image.flip(2)
        image = F.interpolate(image[None], scale_factor=1.0, mode="bilinear")[0]
        return (image - 0.5) / 0.25, self.labels[index]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="vit_small_patch16_224")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    images = torch.randint(0, 256, (1024, 3, 240, 240), dtype=torch.uint8)
    labels = torch.randint(0, 100, (1024,))
    loader = DataLoader(AugmentedImages(images, labels, 224), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, drop_last=True)
    model = timm.create_model(args.model, pretrained=False, num_classes=100).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    scaler = torch.cuda.amp.GradScaler()

    step = 0
    for epoch in range(400):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            with torch.cuda.amp.autocast():
                loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)
            if step == args.steps:
                return


if __name__ == "__main__":
    main()
