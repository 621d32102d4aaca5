"""GPU101 and two facts of what a loader without workers loads (round 18, judged on the fourteenth to seventeenth
corpora):

- a data set built in another module by a function that calls another function of its module that returns the data
  set class over arrays (`read_data()` -> `make_split(rows)` -> `RowDataset(texts, labels)`), with its names set by
  a tuple written out (`texts, labels = [], []`): items indexed from memory (`held_data.py`);
- a part of a `random_split` whose length the code writes (`random_split(full, [55000, 5000])`): that many samples
  for the loading estimate of a pass (`epoch_length.dataset_work`, `loading_cost.py`): a 5,000-sample validation
  pass loads in less time than workers take to start again.

Negatives beside each: a data set of file paths read per item, a data set class that opens a file per item, and the
large part of the split. Index loaders (`DataLoader(range(n), b)`) keep their findings: GPU303's evidence counts
large index batches as the loop's loading (`analysis/index_loaders.py`).
"""

from __future__ import annotations

from tests.conftest import diagnostics, findings
from tests.projects_helper import lint_written

ONLY = {"select": ("GPU101",)}

INDEX_LOADER = """\
    import torch
    from torch.utils.data import DataLoader

    edges = torch.load("edges.pt").cuda()
    features = torch.load("features.pt").cuda()
    model = torch.nn.Linear(256, 1).cuda()
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(100):
        for perm in DataLoader(DATASET, batch_size=1024, shuffle=True):
            pairs = edges[perm.cuda()]
            loss = model(features[pairs[:, 0]] * features[pairs[:, 1]]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


FILES = """\
    class Files(Dataset):
        def __init__(self, names):
            self.names = names

        def __len__(self):
            return len(self.names)

        def __getitem__(self, i):
            with open(self.names[i], "rb") as f:
                return torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)


    names = sorted(open("list.txt").read().split())
"""


def test_a_loader_over_files_read_per_item_keeps_the_finding():
    source = INDEX_LOADER.replace("DATASET", "Files(names)").replace(
        "from torch.utils.data import DataLoader\n", "from torch.utils.data import DataLoader, Dataset\n" + FILES
    )
    assert findings(source, **ONLY) == ["22:17 GPU101"]


def test_an_index_loader_keeps_the_finding():
    source = INDEX_LOADER.replace("DATASET", "mask.nonzero()").replace(
        "import torch\n", "import numpy as np\n    import torch\n"
    ).replace('features = torch.load("features.pt").cuda()', 'features = torch.load("features.pt").cuda()\n    mask = np.load("mask.npy")')
    assert findings(source, **ONLY) == ["11:17 GPU101"]


DATA_MODULE = """
import numpy as np
import torch.utils.data as data


class RowDataset(data.Dataset):
    def __init__(self, texts, labels):
        self.texts = texts
        self.labels = labels

    def __getitem__(self, index):
        GETITEM

    def __len__(self):
        return len(self.texts)


def make_split(rows, length):
    texts, labels = [], []
    for words, label in rows:
        texts.append([hash(w) % 20000 for w in words][:length])
        labels.append(label)
    labels = np.array(labels, dtype=np.int64)
    texts = np.reshape(texts, [-1, length]).astype(np.int32)
    return RowDataset(texts, labels)


def read_data(rows, length=64):
    train = make_split(rows[:8000], length)
    valid = make_split(rows[8000:], length)
    return train, valid, np.zeros((20000, 300))
"""
TRAIN = """
import torch
from torch.utils.data import DataLoader
from data import read_data

rows = torch.load("rows.pt")
train_set, valid_set, embedding = read_data(rows)
train_loader = DataLoader(train_set, batch_size=128, shuffle=True)
valid_loader = DataLoader(valid_set, batch_size=128)
model = torch.nn.Sequential(torch.nn.Embedding(20000, 300), torch.nn.Flatten(), torch.nn.Linear(64 * 300, 2)).cuda()
opt = torch.optim.Adam(model.parameters())
for epoch in range(10):
    for x, y in train_loader:
        loss = torch.nn.functional.cross_entropy(model(x.long().cuda()), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        for x, y in valid_loader:
            model(x.long().cuda())
"""


def _lint_rows(tmp_path, monkeypatch, getitem: str) -> list[str]:
    files = {"data.py": DATA_MODULE.replace("GETITEM", getitem), "train.py": TRAIN}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU101"]


def test_rows_indexed_from_arrays_made_by_a_helper_of_another_module_are_silent(tmp_path, monkeypatch):
    assert _lint_rows(tmp_path, monkeypatch, "return self.texts[index], self.labels[index]") == []


def test_a_data_set_class_that_reads_a_file_per_item_keeps_the_findings(tmp_path, monkeypatch):
    getitem = 'with open(f"cache/{index}.txt") as f:\n            return f.read(), self.labels[index]'
    assert _lint_rows(tmp_path, monkeypatch, getitem) == ["train.py:8 GPU101", "train.py:9 GPU101"]


SPLIT = """\
    import torch
    import torchvision
    from torchvision import transforms
    from torch.utils.data import DataLoader, random_split

    full = torchvision.datasets.FashionMNIST("data", train=True, download=True, transform=transforms.ToTensor())
    train, val = random_split(full, [55000, 5000])
    loader = DataLoader(PART, batch_size=64, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(10):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.view(-1, 784).cuda()), y.cuda())
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def test_a_split_of_five_thousand_images_loads_faster_than_workers_start():
    """5,000 digits at ~0.025 ms: ~125 ms a pass, less than the ~185 ms the fix's workers take to start again."""
    assert findings(SPLIT.replace("PART", "val"), **ONLY) == []


def test_the_large_part_of_the_split_is_reported_with_its_estimate():
    [d] = diagnostics(SPLIT.replace("PART", "train"), **ONLY)
    assert d.message.endswith("at least ~1.4 s a pass (55,000 samples of a split of FashionMNIST's train split)")


def test_a_split_given_as_fractions_is_not_counted():
    source = SPLIT.replace("[55000, 5000]", "[0.9, 0.1]").replace("PART", "val")
    [d] = diagnostics(source, **ONLY)
    assert d.message == "`DataLoader` has no `num_workers`: batches load in the training process"
