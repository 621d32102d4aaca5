"""What a DataLoader worker spends per output pixel to upscale a small image (CIFAR's 32x32) to 224x224, convert
it to float and normalize it: the per-item work of `transforms.Resize(224)`, `ToTensor()`, `Normalize(...)` and two
flips, written with torch's own ops (antialiased bilinear resampling of the uint8 image) so that it runs where
torchvision and Pillow are not installed. One thread, the best of 7 runs of 50 images.
Usage: python bench/resample_cost.py  (bench/results/cost_facts.md, section 8)."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F


def main() -> None:
    torch.set_num_threads(1)
    image = torch.randint(0, 255, (32, 32, 3), dtype=torch.uint8)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def upscale() -> torch.Tensor:
        y = F.interpolate(image.permute(2, 0, 1)[None], size=(224, 224), mode="bilinear", antialias=True, align_corners=False)[0]
        y = (y.float().div(255) - mean) / std
        return torch.flip(torch.flip(y, [2]), [1])

    def convert_only() -> torch.Tensor:
        return (image.permute(2, 0, 1).float().div(255) - mean) / std

    for name, step, pixels in (("resize 32->224, convert, normalize, 2 flips", upscale, 224 * 224), ("convert, normalize at 32x32", convert_only, 32 * 32)):
        best = float("inf")
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(50):
                step()
            best = min(best, (time.perf_counter() - start) / 50)
        print(f"{name}: {best * 1e6:.0f} us an image, {best * 1e9 / pixels:.1f} ns an output pixel")


if __name__ == "__main__":
    main()
