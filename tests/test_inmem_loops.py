"""Two noise classes of the third and fourth held-out corpora, each a fact of the semantic model:

- data already in memory, also across modules: a dataset class of another module whose `__getitem__` only
  indexes what it holds (pre-tokenized prompts), a function of another module returning such datasets or a
  tokenized Hugging Face dataset, a collate class that only pads (`analysis/held_data.py`, `Callee.held`);
  in one module, data built by a method other than `__init__` and updated in place (`data += noise`), a
  dataset class bound by `functools.partial`, a transform that every constructor call leaves `None`, and
  the splits of a dataset dict replaced by a tokenizing `.map` (`analysis/batch_cost.py`);
- loops the code bounds to a handful of iterations: a check that breaks by its `enumerate` counter after a
  few batches, a loop over a dict literal of a few entries (`analysis/loop_bounds.py`), and an empty start
  tensor moved once (`analysis/tensor_size.py`).

The repros are minimal shapes of our own; the findings next to them stay.
"""

from __future__ import annotations

from tests.conftest import diagnostics
from tests.projects_helper import lint_written


def findings(source: str, select: tuple[str, ...]) -> list[str]:
    return [f"{d.location.row} {d.code} {d.message}" for d in diagnostics(source, select=select)]


def codes(source: str, select: tuple[str, ...]) -> list[str]:
    return [f"{d.location.row} {d.code}" for d in diagnostics(source, select=select)]


# ---- data in memory, one module ------------------------------------------------------------------

XOR = """\
import torch
import torch.utils.data as data
from torch import nn


class XORDataset(data.Dataset):
    def __init__(self, size, std=0.1):
        super().__init__()
        self.size = size
        self.std = std
        self.generate()

    def generate(self):
        data = torch.randint(low=0, high=2, size=(self.size, 2), dtype=torch.float32)
        label = (data.sum(dim=1) == 1).to(torch.long)
        data += self.std * torch.randn(data.shape)
        self.data = data
        self.label = label

    def __len__(self):
        return self.size

    def __getitem__(self, idx):
        return {getitem}


device = torch.device("cuda")
model = nn.Linear(2, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = data.DataLoader(XORDataset(size=1000), batch_size=128, shuffle=True)
for epoch in range(100):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = model(x).squeeze(1).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_points_made_by_a_method_and_updated_in_place_are_in_memory():
    assert codes(XOR.format(getitem="self.data[idx], self.label[idx]"), ("GPU101", "GPU102")) == []


def test_points_read_from_files_by_getitem_are_still_reported():
    source = XOR.format(getitem="torch.load(f'points/{idx}.pt'), self.label[idx]")
    assert codes(source, ("GPU101", "GPU102")) == ["30 GPU101", "30 GPU102"]


PARTIAL = """\
from functools import partial

import torch
import torch.utils.data as data
from torch import nn


class ReverseDataset(data.Dataset):
    def __init__(self, num_categories, seq_len, size):
        super().__init__()
        self.size = size
        self.data = {made}

    def __len__(self):
        return self.size

    def __getitem__(self, idx):
        inp = self.data[idx]
        return inp, torch.flip(inp, dims=(0,))


device = torch.device("cuda")
model = nn.Embedding(10, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = partial(ReverseDataset, 10, 16)
loader = data.DataLoader(dataset(50000), batch_size=128)
for epoch in range(10):
    for x, y in loader:
        loss = model(x.to(device)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_dataset_class_bound_by_partial_holds_random_sequences():
    assert codes(PARTIAL.format(made="torch.randint(num_categories, size=(size, seq_len))"), ("GPU101", "GPU102")) == []


def test_a_dataset_class_bound_by_partial_that_reads_files_is_still_reported():
    made = "[open(f'seq{i}.txt').read() for i in range(size)]"
    assert codes(PARTIAL.format(made=made).replace("inp = self.data[idx]", "inp = torch.load(self.data[idx])"), ("GPU101",)) == [
        "26 GPU101"
    ]


TRANSFORM = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self, features, labels, t=None):
        self.T = t
        self.features = torch.tensor(features, dtype=torch.float32)
        self.labels = torch.tensor(labels, dtype=torch.float32)

    def __getitem__(self, index):
        sample, target = self.features[index], self.labels[index]
        if self.T:
            return self.T(sample), target
        return sample, target

    def __len__(self):
        return len(self.features)


def get_loader(features, labels, batch_size):
    return DataLoader(Rows(features, labels{given}), batch_size=batch_size, shuffle=True)


def train(model, features, labels, opt):
    for x, y in get_loader(features, labels, 64):
        loss = ((model(x.cuda()) - y.cuda()) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_transform_every_constructor_call_leaves_none_never_runs():
    assert codes(TRANSFORM.format(given=""), ("GPU101",)) == []


def test_a_transform_a_call_gives_is_work():
    assert codes(TRANSFORM.format(given=", t=augment"), ("GPU101",)) == ["22 GPU101"]


GLUE = """\
import datasets
import torch
from torch.utils.data import DataLoader
from transformers import AutoTokenizer


class GLUEDataModule:
    def __init__(self, name):
        self.tokenizer = AutoTokenizer.from_pretrained(name)

    def setup(self):
        self.dataset = datasets.load_dataset("glue", "mrpc")
        for split in self.dataset.keys():
            self.dataset[split] = self.dataset[split].map({mapped}, batched=True)
            self.dataset[split].set_format(type="torch")

    def train_dataloader(self):
        return DataLoader(self.dataset["train"], batch_size=32, shuffle=True)

    def convert_to_features(self, batch):
        return self.tokenizer.batch_encode_plus(batch["sentence"], max_length=128, truncation=True)

    def lowercase(self, batch):
        return {{"sentence": [s.lower() for s in batch["sentence"]]}}


def train(model, opt):
    dm = GLUEDataModule("bert-base-cased")
    dm.setup()
    for batch in dm.train_dataloader():
        loss = model(**{{k: v.cuda() for k, v in batch.items()}}).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_splits_replaced_by_a_tokenizing_map_hold_token_ids():
    assert codes(GLUE.format(mapped="self.convert_to_features"), ("GPU101",)) == []


def test_splits_mapped_by_a_function_that_does_not_tokenize_are_still_reported():
    assert codes(GLUE.format(mapped="self.lowercase"), ("GPU101",)) == ["18 GPU101"]


# ---- data in memory, across modules --------------------------------------------------------------

DATA_UTILS = """\
import torch
from torch.utils.data import Dataset
from torch.nn.utils.rnn import pad_sequence
from PIL import Image


class PromptDataset(Dataset):
    def __init__(self, prompts, chosen, pad_token_id):
        self.prompts = prompts
        self.chosen = chosen
        self.pad_token_id = pad_token_id

    def __len__(self):
        return len(self.chosen)

    def __getitem__(self, idx):
        return {
            "input_ids": self.chosen[idx]["input_ids"],
            "labels": torch.where(self.chosen[idx]["attention_mask"].bool(), self.chosen[idx]["input_ids"], -100),
        }


class ImageDataset(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        return torch.from_numpy(Image.open(self.paths[idx]))


class PadCollator:
    def __init__(self, max_len):
        self.max_len = max_len

    def __call__(self, data):
        ids = pad_sequence([f[0] for f in data], batch_first=True)
        pad = self.max_len - ids.size()[-1]
        return torch.nn.functional.pad(ids, pad=(0, pad))


class AugmentCollator:
    def __call__(self, data):
        return torch.stack([f[0] for f in data]) * 0.5 + torch.randn(1)


def create_split(raw, tokenizer):
    prompts, chosen = [], []
    for row in raw:
        chosen.append(tokenizer(row["chosen"], return_tensors="pt"))
        prompts.append(tokenizer(row["prompt"], return_tensors="pt"))
    return PromptDataset(prompts, chosen, tokenizer.pad_token_id)


def create_prompt_dataset(path, raw, tokenizer):
    train = create_split(raw, tokenizer)
    torch.save(train, path)
    return torch.load(path), torch.load(path + ".eval")


def image_datasets(root):
    return ImageDataset(sorted(root.glob("*.png"))), None
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader
from data_utils import create_prompt_dataset, image_datasets, PadCollator, AugmentCollator

device = torch.device("cuda")


def main(model, opt, raw, tokenizer, root):
    train_dataset, eval_dataset = create_prompt_dataset("cache.pt", raw, tokenizer)
    images, _ = image_datasets(root)
    loaders = [
        DataLoader(train_dataset, batch_size=8, collate_fn=PadCollator(512)),
        DataLoader(eval_dataset, batch_size=8, collate_fn=AugmentCollator()),
        DataLoader(images, batch_size=8),
    ]
    for loader in loaders:
        for batch in loader:
            loss = model(batch.to(device)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def test_pretokenized_datasets_and_a_padding_collator_of_another_module_are_in_memory(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"data_utils.py": DATA_UTILS, "main.py": MAIN}, monkeypatch)
    assert [f for f in found if f.endswith("GPU101")] == [
        "main.py:13 GPU101",  # the collate function adds noise to every batch: work a worker could take
        "main.py:14 GPU101",  # images decoded from files by `__getitem__`: not in memory
    ]


def test_the_summary_records_what_is_held_and_nothing_else():
    from gpulint.analysis.summary import summarize

    held = summarize(DATA_UTILS).held
    assert held == {
        "PromptDataset": {"items": ["chosen"]},  # the constructor parameter `__getitem__` reads from
        "PadCollator": {"collate": True},
        "create_prompt_dataset": ["tuple", ["cheap", "cheap"]],
        "create_split": "cheap",  # `PromptDataset(prompts, chosen, ...)` of lists it fills (`prompts, chosen = [], []`)
    }


TOKENIZED = """\
from datasets import load_dataset


def get_unsupervised_data(name, tokenizer):
    raw = load_dataset(name{streaming})

    def tokenize_function(examples):
        return tokenizer(examples["text"])

    tokenized = raw.map(tokenize_function, batched=True)
    return tokenized["train"]
"""

TRAIN_TOKENIZED = """\
import torch
from torch.utils.data import DataLoader
from transformers import default_data_collator
from data import get_unsupervised_data


def train(model, opt, tokenizer, enabled):
    dataset = get_unsupervised_data("wikitext", tokenizer) if enabled else None
    loader = DataLoader(dataset, batch_size=8, collate_fn=default_data_collator)
    for batch in loader:
        loss = model(batch["input_ids"].cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_dataset_tokenized_by_map_in_another_module_holds_token_ids(tmp_path, monkeypatch):
    files = {"data.py": TOKENIZED.format(streaming=""), "train.py": TRAIN_TOKENIZED}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU101")] == []


def test_a_streamed_dataset_mapped_in_another_module_is_still_reported(tmp_path, monkeypatch):
    files = {"data.py": TOKENIZED.format(streaming=", streaming=True"), "train.py": TRAIN_TOKENIZED}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU101")] == ["train.py:9 GPU101"]


# ---- short loops ---------------------------------------------------------------------------------

ROBUST = """\
import torch
from torch.utils.data import DataLoader
from torchvision import datasets


def check(model, loader):
    top1 = 0
    for i, (batch, label) in enumerate(loader):
        batch, label = batch.to("cuda"), label.to("cuda")
        y = torch.zeros(batch.shape[0], 100000).cuda()  # (64 rows x 100000: a size worth a finding, factory_bytes.py)
        out = model(batch) + y
        top1 += int(out.argmax(1).eq(label).sum().item())
        if i {test}:
            break
    return top1


if __name__ == "__main__":
    model = torch.nn.Linear(10, 10).cuda()
    loader = DataLoader(datasets.ImageFolder("data"), batch_size=64, num_workers=8, pin_memory=False)
    check(model, loader)
"""


def test_a_check_that_breaks_after_a_few_batches_is_no_per_step_loop():
    assert codes(ROBUST.format(test="> 5"), ("GPU102", "GPU201", "GPU303")) == []
    assert codes(ROBUST.format(test=">= 9"), ("GPU102", "GPU201", "GPU303")) == []


def test_a_loop_that_breaks_after_many_batches_is_still_per_step():
    # (the read at line 12 is followed only by the break test and the next batch's blocking copies, from a loader
    # with 8 workers: the step waits there anyway, see step_syncs; GPU201 shows the loop is per step)
    expected = ["10 GPU201", "20 GPU102"]
    assert sorted(codes(ROBUST.format(test="> 500"), ("GPU102", "GPU201", "GPU303"))) == expected
    assert sorted(codes(ROBUST.format(test="> n_batches"), ("GPU102", "GPU201", "GPU303"))) == expected
    # the break is under a condition of its own: how far the loop runs is not written
    source = ROBUST.format(test="> 5 and early").replace("if i > 5 and early", "if i > 5 and early")
    assert sorted(codes(source, ("GPU201", "GPU303"))) == ["10 GPU201"]
    assert sorted(codes(source.replace(BLOCKING, NON_BLOCKING), ("GPU201", "GPU303"))) == ["12 GPU303"]


BLOCKING = 'batch, label = batch.to("cuda"), label.to("cuda")\n        y = torch.zeros(batch.shape[0], 100000).cuda()'
NON_BLOCKING = 'batch, label = batch.to("cuda", non_blocking=True), label.to("cuda", non_blocking=True)\n        y = torch.zeros(batch.shape[0], 100000, device="cuda")'


def test_a_counter_that_is_skipped_by_continue_bounds_nothing():
    source = ROBUST.format(test="> 5").replace(BLOCKING, NON_BLOCKING).replace("        out = model(batch) + y\n", "        out = model(batch) + y\n        if out.isnan().any():\n            continue\n")
    # the second read (line 14) is named in the first one's finding: nothing is queued between them, one wait (read_runs)
    found = diagnostics(source, select=("GPU303",))
    assert [d.location.row for d in found] == [12]
    assert "as does the read after it at line 14" in found[0].message


ACTIVATIONS = """\
import torch
from torch import nn

device = torch.device("cuda")
act_fn_by_name = {entries}


def visualize_gradients(net, x, y):
    net.zero_grad()
    loss = nn.functional.cross_entropy(net(x), y)
    loss.backward()
    print(f"loss {{loss.item()}}")


x = torch.randn(8, 4, device=device)
y = torch.zeros(8, dtype=torch.long, device=device)
for i, name in enumerate(act_fn_by_name):
    net = nn.Sequential(nn.Linear(4, 4), act_fn_by_name[name]()).to(device)
    visualize_gradients(net, x, y)
"""


def test_a_loop_over_a_few_hand_written_entries_runs_a_handful_of_times():
    assert codes(ACTIVATIONS.format(entries='{"sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "relu": nn.ReLU}'), ("GPU303",)) == []


def test_a_loop_over_a_long_or_grown_dict_is_still_per_step():
    many = "{" + ", ".join(f'"a{i}": nn.ReLU' for i in range(200)) + "}"  # more than `loop_bounds.SHORT_LOOP`
    assert codes(ACTIVATIONS.format(entries=many), ("GPU303",)) == ["12 GPU303"]  # in the helper the loop runs
    grown = ACTIVATIONS.format(entries='{"relu": nn.ReLU}').replace("\nx = torch", '\nact_fn_by_name["tanh"] = nn.Tanh\nx = torch')
    assert codes(grown, ("GPU303",)) == ["12 GPU303"]


EMPTY = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torch.nn.Linear(4, 2).to(device)
loader = DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4)), batch_size=8)
with torch.no_grad():
    for (x,) in loader:
        seen = {made}.to(device)
        seen = torch.cat([seen, model(x.to(device))])
"""


def test_an_empty_start_tensor_copies_nothing():
    assert codes(EMPTY.format(made="torch.empty(0)"), ("GPU201",)) == []


def test_a_filled_tensor_moved_per_batch_is_still_reported():
    # (8 x 100000 floats: at most the loader's 8 rows, a size worth a finding; 8 x 2 is silent, factory_bytes.py)
    assert codes(EMPTY.format(made="torch.zeros(x.size(0), 100000)"), ("GPU201",)) == ["9 GPU201"]
    assert codes(EMPTY.format(made="torch.zeros(x.size(0), 2)"), ("GPU201",)) == []


HANDED = """\
import lightning as L
import torch
from torch.utils.data import DataLoader
from torchvision import datasets



class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(10, 2)

    def test_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)


model = Classifier()
test_loader = DataLoader(datasets.ImageFolder("test"), batch_size=64, num_workers=4)
images, labels = next(iter(test_loader))
trainer = L.Trainer(accelerator="gpu", devices=1)
trainer.test(model, dataloaders=test_loader)
"""


def reads_a_few_batches(source: str) -> list[bool]:
    import libcst as cst

    from gpulint.analysis.model import SemanticModel

    model = SemanticModel(cst.parse_module(source), "train.py", source)
    return [model.batch_cost.reads_a_few_batches(info) for info in model.loader_flow.infos]


def test_a_loader_read_once_and_handed_to_a_framework_is_read_in_full():
    assert reads_a_few_batches(HANDED) == [False]  # `trainer.test` reads every batch (MHAttention's anomaly loaders)
    assert reads_a_few_batches(HANDED.replace("trainer.test(model, dataloaders=test_loader)\n", "")) == [True]


COUNTED = """\
import torch


def smoke(model, loader, opt):
    step = 0
    for x, y in loader:
        step += 1
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
        if step >= {limit}:
            break


def smoke_while(model, it, opt):
    n = 0
    while True:
        x, y = next(it)
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
        n += 1
        if n == {limit}:
            break
"""


def test_a_counter_raised_every_iteration_bounds_a_smoke_run():
    assert codes(COUNTED.format(limit="5"), ("GPU303",)) == []


def test_a_counter_with_a_large_or_unknown_bound_is_still_per_step():
    assert codes(COUNTED.format(limit="500"), ("GPU303",)) == ["12 GPU303", "25 GPU303"]  # above `SHORT_LOOP`
    assert codes(COUNTED.format(limit="args.max_steps"), ("GPU303",)) == ["12 GPU303", "25 GPU303"]
    reset = COUNTED.format(limit="5").replace("        print(loss.item())\n        if step", "        print(loss.item())\n        step = step % 3\n        if step")
    assert codes(reset, ("GPU303",)) == ["12 GPU303"]  # `step` is also set in the loop: it no longer counts iterations
