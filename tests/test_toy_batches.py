"""Toy dense models on small batches held in memory (`model_size.toy_loop` through a DataLoader), column counts of
tables selected by name (`model_size.columns`), and two in-memory loader shapes (`random_split` imported from
`torch.utils.data.dataset`, a packing collate a notebook defines twice): issue 13's seventh-corpus noise."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpulint.analysis import SemanticModel
from tests.conftest import findings

TABLE = """\
import pandas as pd
import torch
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
df = pd.read_csv("auto-mpg.csv")
x = df[["cylinders", "displacement", "horsepower", "weight", "acceleration", "year", "origin"]].values
y = df["mpg"].values
x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25)
scaler = StandardScaler()
x_train = scaler.fit_transform(x_train)
x_train = torch.tensor(x_train, device=device, dtype=torch.float32)
y_train = torch.tensor(y_train, device=device, dtype=torch.float32)
BATCH_SIZE = {batch}
loader = DataLoader({dataset}, batch_size=BATCH_SIZE, shuffle=True)
model = {model}.to(device)
loss_fn = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(1000):
    for x_batch, y_batch in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x_batch).flatten(), y_batch)
        loss.backward()
        optimizer.step()
        print(loss.item())
"""
MLP = "nn.Sequential(nn.Linear(x_train.shape[1], 50), nn.ReLU(), nn.Linear(50, 25), nn.ReLU(), nn.Linear(25, 1))"


def gpu303(batch: int = 16, dataset: str = "TensorDataset(x_train, y_train)", model: str = MLP) -> list[str]:
    source = TABLE.format(batch=batch, dataset=dataset, model=model)
    return [f for f in findings(source, select=("GPU303",)) if "GPU303" in f]


def test_toy_mlp_on_in_memory_batches_is_silent():
    assert gpu303() == []


@pytest.mark.parametrize(
    "change",
    [
        {"model": "nn.Sequential(nn.Linear(x_train.shape[1], 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.Linear(1024, 1))"},  # 1.1M
        {"batch": 1024},  # a batch of a thousand rows and more: not a toy step
        {"dataset": "torchvision.datasets.ImageFolder('train')"},  # items decoded from files
        {"model": "nn.Sequential(nn.Conv1d(1, 8, 3), nn.Flatten(), nn.LazyLinear(1))"},  # a convolution: no estimate
    ],
)
def test_real_work_stays_reported(change):
    assert len(gpu303(**change)) == 1


def test_toy_cnn_on_in_memory_batches_stays_reported():
    model = "nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 26 * 26, 1))"
    assert len(gpu303(model=model)) == 1  # 5.4k parameters, but a convolution's work grows with the image


def test_compiled_toy_model_is_silent():
    assert gpu303(model=f"torch.compile({MLP})") == []


def estimate(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    model = SemanticModel(module, "m.py")
    target = next(s for s in module.body if isinstance(s, cst.SimpleStatementLine) and model.code(s).strip().startswith("model ="))
    return model.model_size.parameters(target.body[0].value)


@pytest.mark.parametrize(
    "data, expected",
    [
        ('x = df[["a", "b", "c"]].values\nx_train, x_test, y_train, y_test = train_test_split(x, y)', 3 * 50 + 50 + 51),
        ('x = df[["a", "b", "c"]].to_numpy()\nx_train, x_test = train_test_split(x)\nx_train = scaler.fit_transform(x_train)', 251),
        ("x_train, y = make_classification(n_samples=1600, n_features=8)", 8 * 50 + 50 + 51),
        ("x_train, y = make_classification(n_samples=1600)", 20 * 50 + 50 + 51),  # the default: 20 features
        ('x_train = pd.get_dummies(df).values', None),  # columns made from the data: unknown
        ('x_train = df.drop(columns=["y"]).values', None),
        ('x = df[["a", "b"]].values\ny = df[["c"]].values\ny_train, y_test, x_train, x_test = train_test_split(y, x)', 201),  # x's part
    ],
)
def test_column_counts(data, expected):
    source = (
        "import pandas as pd\nimport torch.nn as nn\nfrom sklearn.model_selection import train_test_split\n"
        "from sklearn.datasets import make_classification\n"
        f"{data}\nmodel = nn.Sequential(nn.Linear(x_train.shape[1], 50), nn.ReLU(), nn.Linear(50, 1))\n"
    )
    assert estimate(source) == expected


LOADERS = """\
import torch
import torch.nn.utils.rnn as rnn_utils
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torch.utils.data.dataset import random_split

device = "cuda"
model = torch.nn.LSTM(2, 256).to(device)
{data}
for epoch in range(100):
    for x_batch, y_batch in loader:
        out = model(x_batch.to(device))
"""


def gpu10x(data: str) -> list[str]:
    return [f.split()[1] for f in findings(LOADERS.format(data=textwrap.dedent(data)), select=("GPU101", "GPU102"))]


def test_random_split_of_the_dataset_module_keeps_the_tensor_dataset():
    data = """\
        dataset = TensorDataset(torch.from_numpy(x).float(), torch.from_numpy(y).float())
        train_data, val_data = random_split(dataset, [80, 20])
        loader = DataLoader(dataset=train_data, batch_size=16, shuffle=True)
        """
    assert gpu10x(data) == []


SEQUENCES = """\
class Sequences(Dataset):
    def __init__(self, x, y):
        self.x = [torch.as_tensor(s).float() for s in x]
        self.y = torch.as_tensor(y).float().view(-1, 1)

    def __getitem__(self, index):
        return (self.x[index], self.y[index])

    def __len__(self):
        return len(self.x)

def pack_collate(batch):
    X = [item[0] for item in batch]
    y = [item[1] for item in batch]
    return rnn_utils.pack_sequence(X, enforce_sorted=False), torch.as_tensor(y).view(-1, 1)

def pack_collate(batch):
    X = [item[0] for item in batch]
    y = [item[1] for item in batch]
    return {second}, torch.as_tensor(y).view(-1, 1)

loader = DataLoader(Sequences(points, directions), batch_size=16, shuffle=True, collate_fn=pack_collate)
"""


def test_packing_collate_defined_twice_is_cheap():
    assert gpu10x(SEQUENCES.format(second="rnn_utils.pack_sequence(X, enforce_sorted=False)")) == []


def test_a_second_definition_that_decodes_keeps_the_finding():
    assert "GPU101" in gpu10x(SEQUENCES.format(second="rnn_utils.pack_sequence([decode(p) for p in X])"))


TABLE_DATASET = """\
import pandas as pd
import torch
from sklearn.preprocessing import LabelEncoder
from torch.utils.data import DataLoader, Dataset

class Tabular(Dataset):
    def __init__(self, X, Y):
        self.x = X.values
        self.y = Y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, idx):
        return (self.x[idx], self.y[idx])

df = pd.read_csv("adult.csv")
Y = LabelEncoder().fit_transform(df["salary"])
X = {table}
model = torch.nn.Linear(14, 2).cuda()
loader = DataLoader(Tabular(X, Y), batch_size=1024, shuffle=True)
for epoch in range(100):
    for x, y in loader:
        out = model(x.float().cuda())
"""


def test_rows_of_a_table_read_whole_are_in_memory():
    source = TABLE_DATASET.format(table='df.drop(columns="salary")')
    assert [f for f in findings(source, select=("GPU101",))] == []


def test_rows_of_an_unknown_table_stay_reported():
    source = TABLE_DATASET.format(table='open_table("adult").drop(columns="salary")')
    assert [f.split()[1] for f in findings(source, select=("GPU101",))] == ["GPU101"]


HF_TRAINER = """\
from datasets import load_dataset
from transformers import AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
raw = load_dataset("imdb")

def tokenize(row):
    return tokenizer(row["text"], truncation=True, padding="max_length", max_length=30)

first = raw["train"].map(tokenize, batched=True)

def tokenize(row):
    return {second}

tokenized = raw["train"].map(tokenize, batched=True)
tokenized.set_format(type="torch")
args = TrainingArguments("out", per_device_train_batch_size=1)
trainer = Trainer(model=model, args=args, train_dataset=tokenized)
trainer.train()
"""


def test_a_tokenizing_map_function_a_notebook_defines_twice_is_tokens():
    source = HF_TRAINER.format(second='tokenizer(row["text"])')
    assert findings(source, select=("GPU107",)) == []


def test_a_second_definition_that_decodes_images_keeps_gpu107():
    source = HF_TRAINER.format(second='{"pixels": [load_image(p) for p in row["path"]]}')
    assert [f.split()[1] for f in findings(source, select=("GPU107",))] == ["GPU107"]


TRANSLATION = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

def encode(text, stoi):
    ids = [1]
    for token in text.split():
        ids.append(stoi.get(token, 0))
    ids.append(2)
    return ids

class Pairs(Dataset):
    def __init__(self, pairs):
        self.pairs = pairs

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, idx):
        en, fr = self.pairs[idx]
        return torch.tensor(encode(en, {vocabulary}), dtype=torch.long), torch.tensor(encode(fr, {vocabulary}), dtype=torch.long)

def collate(batch):
    src, tgt = zip(*batch)
    return nn.utils.rnn.pad_sequence(src, batch_first=True), nn.utils.rnn.pad_sequence(tgt, batch_first=True)

loader = DataLoader(Pairs(pairs), batch_size=64, shuffle=True, collate_fn=collate)
model = nn.Transformer(d_model=512).cuda()
for epoch in range(10):
    for src, tgt in loader:
        out = model(src.cuda(), tgt.cuda())
"""


def test_ids_looked_up_in_a_vocabulary_are_small_batches_but_still_work_for_workers():
    codes = [f.split()[1] for f in findings(TRANSLATION.format(vocabulary="src_stoi"), select=("GPU101", "GPU102"))]
    assert codes == ["GPU101"]  # encoding each pair in process is work; pinning a few KB of ids is not


def test_a_lookup_in_another_table_keeps_gpu102():
    codes = [f.split()[1] for f in findings(TRANSLATION.format(vocabulary="feature_table"), select=("GPU101", "GPU102"))]
    assert codes == ["GPU101", "GPU102"]


GENERATED = """\
import torch
from torch import nn
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

device = "cuda"
{data}
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2)
scaler = StandardScaler()
X_train = scaler.fit_transform(X_train)
X_train_t = torch.tensor(X_train, dtype=torch.float32, device=device)
y_train_t = torch.tensor(y_train, dtype=torch.long, device=device)
model = nn.Sequential(nn.Linear(X_train.shape[1], 64), nn.ReLU(), nn.Linear(64, 2)).to(device)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(50):
    perm = torch.randperm(X_train_t.size(0))
    for i in range(0, X_train_t.size(0), 64):
        idx = perm[i:i + 64]
        xb, yb = X_train_t[idx], y_train_t[idx]
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


def test_toy_model_on_generated_data_split_scaled_and_sliced_is_silent():
    source = GENERATED.format(data="X, y = make_classification(n_samples=2000, n_features=20)")
    assert [f for f in findings(source, select=("GPU303",))] == []


def test_the_same_model_on_a_file_stays_reported():
    source = GENERATED.format(data='X, y = load_svmlight_file("train.svm")').replace("X_train.shape[1]", "20")  # (sizes known)
    assert [f.split()[1] for f in findings(source, select=("GPU303",))] == ["GPU303"]
