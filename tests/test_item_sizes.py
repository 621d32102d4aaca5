"""GPU103 and items whose size is each item's own (`analysis/item_sizes.py`): a Dataset whose `__getitem__` resizes
every photograph by its own aspect ratio (`T.Resize((int(256 * aspect_ratio), 256))`, `aspect_ratio =
image.size[1] / image.size[0]`): two items differ in shape and the default collate cannot stack them, so
`batch_size=1` is what the code needs (fourteenth corpus, both judges: wrong). Negatives: a fixed last size, a
fixed crop after the own-size resize, and a size from the constructor."""

from __future__ import annotations

from tests.conftest import findings

GPU103 = {"select": ("GPU103",)}

SOURCE = """\
import torch
from PIL import Image
from torch.utils import data
from torchvision import transforms as T


class ImageFolder(data.Dataset):
    def __init__(self, paths, image_size=256):
        self.paths = paths
        self.image_size = image_size

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        image = Image.open(self.paths[index])
        aspect_ratio = image.size[1] / image.size[0]
        transform = []
        if index % 2:
            aspect_ratio = 1 / aspect_ratio
        transform.append(SIZE)
        transform.append(T.ToTensor())
        return T.Compose(transform)(image), 0


loader = data.DataLoader(ImageFolder(paths), batch_size=1, shuffle=True)
model = Net().cuda()
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(100):
    for x, y in loader:
        loss = model(x.cuda()).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_items_resized_by_their_own_aspect_ratio_need_batches_of_one():
    own = SOURCE.replace("SIZE", "T.Resize((int(256 * aspect_ratio) - int(256 * aspect_ratio) % 16, 256))")
    assert findings(own, **GPU103) == []
    direct = SOURCE.replace("SIZE", "T.Resize((image.size[1] // 2, image.size[0] // 2))")
    assert findings(direct, **GPU103) == []


def test_a_fixed_last_size_keeps_the_finding():
    fixed = SOURCE.replace("SIZE", "T.Resize((256, 256))")
    assert findings(fixed, **GPU103) == ["26:10 GPU103"]
    cropped = SOURCE.replace("SIZE", "T.Resize((int(256 * aspect_ratio), 256))")
    cropped = cropped.replace("        transform.append(T.ToTensor())", "        transform.append(T.CenterCrop(224))\n        transform.append(T.ToTensor())")
    assert findings(cropped, **GPU103) == ["27:10 GPU103"]
    configured = SOURCE.replace("SIZE", "T.Resize((self.image_size, self.image_size))")
    assert findings(configured, **GPU103) == ["26:10 GPU103"]
