"""A study over image sizes: one whole evaluation per size (eleven sizes)."""
import torch
from torch import nn

from data import test_loader

model = nn.Conv2d(3, 8, 3).cuda().eval()
sizes = list(range(256, 1536 + 128, 128))
results = []
with torch.no_grad():
    for size in sizes:
        images = torch.randn(1, 3, size, size, device="cuda")
        results.append(model(images).mean().item())
    for images, _ in test_loader:
        results.append(model(images.cuda()).mean().item())
