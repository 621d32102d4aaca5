"""Host reads that do not look like `.item()` (issue 14, eleventh corpus classes A and B).

- Python slicing with a GPU tensor as a bound (`mels[i, :, :lengths[i]]`, StyleTTS2): the slice reads its
  bounds with `__index__`, a copy to the host and a wait, once per sample.
- `for seq, n in zip(mels, lengths):` hands `n` the elements of `lengths` (not only the first GPU iterable's).
- A model moved on GPU runs only (`net.Net(params).cuda() if params.cuda else net.Net(params)`, CS230), or moved in
  place after being built by one of several project classes (`UserScatteredDataParallel(m)` in one branch, CSAIL):
  the training function of another module that receives it reads its loss every step.
Negatives beside each: host lengths, fixed bounds, guarded reads, CPU runs, GPU-ness unknown.
"""

from __future__ import annotations

from tests.projects_helper import lint, write

SLICING = """
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torch.nn.Linear(80, 80).to(device)
opt = torch.optim.Adam(model.parameters())
loader = DataLoader(range(100), batch_size=8, num_workers=4, pin_memory=True)


def train():
    for step, (mels, lengths) in enumerate(loader):
        mels, lengths = mels.to(device, non_blocking=True), lengths.to(device, non_blocking=True)
        loss = model(mels).mean()
        for i in range(mels.size(0)):
            loss = loss + mels[i, :, :lengths[i]].mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
"""


def _found(tmp_path, monkeypatch, files, select=("GPU303",)):
    diagnostics = lint(write(tmp_path, files), monkeypatch, select=select)
    return sorted((d.filename, d.location.row, d.code, d.message, d.help) for d in diagnostics)


def test_slicing_with_a_gpu_length_per_sample_is_a_host_read(tmp_path, monkeypatch):
    found = _found(tmp_path, monkeypatch, {"train.py": SLICING})
    assert [(f, row, code, message) for f, row, code, message, _ in found] == [
        ("train.py", 16, "GPU303", "`mels[i, :, :lengths[i]]` (the slice bound `lengths[i]` is a GPU tensor) waits for the GPU "
         "every training step (loop at line 12)"),
    ]
    assert found[0][4] == (
        "It waits once per iteration of the loop at line 15 inside the step; copy the lengths to the host once per "
        "batch (`lengths.tolist()`) and slice with those Python ints"
    )


def test_slicing_with_host_lengths_or_fixed_bounds_stays_silent(tmp_path, monkeypatch):
    host = SLICING.replace("        for i in range(mels.size(0)):", "        host_lengths = lengths_cpu.tolist()\n        for i in range(mels.size(0)):")
    host = host.replace("mels[i, :, :lengths[i]]", "mels[i, :, :host_lengths[i]]")
    host = host.replace("for step, (mels, lengths) in", "for step, (mels, lengths_cpu) in").replace(
        "lengths.to(device, non_blocking=True)", "lengths_cpu.to(device, non_blocking=True)")
    assert _found(tmp_path, monkeypatch, {"train.py": host}) == []
    fixed = SLICING.replace("mels[i, :, :lengths[i]]", "mels[i, :, :mels.shape[-1] // 2]")
    assert _found(tmp_path, monkeypatch, {"train.py": fixed}) == []


def test_slicing_with_a_gpu_length_under_a_rate_limit_or_on_the_cpu_stays_silent(tmp_path, monkeypatch):
    guarded = SLICING.replace(
        "        for i in range(mels.size(0)):", "        if step % 100 == 0:\n          for i in range(mels.size(0)):"
    )
    assert _found(tmp_path, monkeypatch, {"train.py": guarded}) == []
    cpu = SLICING.replace('device = torch.device("cuda")', 'device = torch.device("cpu")')
    assert _found(tmp_path, monkeypatch, {"train.py": cpu}) == []


def test_slicing_with_lengths_of_unknown_residency_stays_silent(tmp_path, monkeypatch):
    """`lengths` straight from the loader, never moved: a CPU tensor (or a list) as far as anyone can tell."""
    unmoved = SLICING.replace(", lengths.to(device, non_blocking=True)", ", lengths").replace(
        "mels, lengths = mels", "mels, lengths_kept = mels")
    assert _found(tmp_path, monkeypatch, {"train.py": unmoved}) == []


def test_zip_hands_each_target_the_elements_of_its_own_iterable(tmp_path, monkeypatch):
    zipped = SLICING.replace(
        "        for i in range(mels.size(0)):\n            loss = loss + mels[i, :, :lengths[i]].mean()",
        "        for seq, n in zip(mels, lengths):\n            loss = loss + seq[:n].mean()",
    )
    found = _found(tmp_path, monkeypatch, {"train.py": zipped})
    assert [(row, message) for _, row, _, message, _ in found] == [
        (16, "`seq[:n]` (the slice bound `n` is a GPU tensor) waits for the GPU every training step (loop at line 12)"),
    ]
    host = zipped.replace("zip(mels, lengths)", "zip(mels, lengths.tolist())")
    found = _found(tmp_path, monkeypatch, {"train.py": host})
    assert [row for _, row, *_ in found] == [15]  # the one `.tolist()` of the batch, not the slices


NET = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, params):
        super().__init__()
        self.fc = nn.Linear(10, 2)

    def forward(self, x):
        return self.fc(x)


class Wrapped(nn.DataParallel):
    pass


def loss_fn(outputs, labels):
    return nn.functional.cross_entropy(outputs, labels)
"""

TRAIN = """
import torch

import net
from loops import train


class Params:
    pass


if __name__ == "__main__":
    params = Params()
    params.cuda = torch.cuda.is_available()
    model = net.Net(params).cuda() if params.cuda else net.Net(params)
    optimizer = torch.optim.Adam(model.parameters())
    loader = torch.utils.data.DataLoader(list(range(1000)), batch_size=32, num_workers=4, pin_memory=True)
    for epoch in range(10):
        train(model, optimizer, net.loss_fn, loader, params)
"""

LOOPS = """
class RunningAverage:
    def __init__(self):
        self.total = 0
        self.steps = 0

    def update(self, val):
        self.total += val
        self.steps += 1


def train(model, optimizer, loss_fn, dataloader, params):
    model.train()
    loss_avg = RunningAverage()
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        if params.cuda:
            train_batch, labels_batch = train_batch.cuda(non_blocking=True), labels_batch.cuda(non_blocking=True)
        output_batch = model(train_batch)
        loss = loss_fn(output_batch, labels_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_avg.update(loss.item())
"""


def test_a_model_moved_on_gpu_runs_reads_its_loss_in_another_modules_loop(tmp_path, monkeypatch):
    found = _found(tmp_path, monkeypatch, {"net.py": NET, "train.py": TRAIN, "loops.py": LOOPS})
    assert [(f, row, message) for f, row, _, message, _ in found] == [
        ("loops.py", 23, "`loss.item()` waits for the GPU every training step (loop at line 15)"),
    ]


def test_a_model_left_on_the_cpu_by_a_shipped_flag_stays_silent(tmp_path, monkeypatch):
    """`Namespace(cuda=False)`: the shipped run keeps the model where it was built."""
    flag = TRAIN.replace("import torch\n", "import argparse\n\nimport torch\n", 1).replace(
        "    params = Params()\n    params.cuda = torch.cuda.is_available()\n", ""
    ).replace('if __name__ == "__main__":', 'params = argparse.Namespace(cuda=False)\nif __name__ == "__main__":')
    assert _found(tmp_path, monkeypatch, {"net.py": NET, "train.py": flag, "loops.py": LOOPS}) == []


def test_a_model_moved_in_place_after_either_of_two_project_classes_built_it(tmp_path, monkeypatch):
    wrapped = TRAIN.replace(
        "    model = net.Net(params).cuda() if params.cuda else net.Net(params)\n",
        "    model = net.Net(params)\n    if torch.cuda.device_count() > 1:\n        model = net.Wrapped(model)\n    model.cuda()\n",
    )
    found = _found(tmp_path, monkeypatch, {"net.py": NET, "train.py": wrapped, "loops.py": LOOPS})
    assert [(f, row) for f, row, *_ in found] == [("loops.py", 23)]


def test_a_model_built_by_a_factory_function_in_one_branch_stays_unknown(tmp_path, monkeypatch):
    """`build(params)` is no class: what it returns (and whether `.cuda()` moves it in place) is not known."""
    built = TRAIN.replace(
        "    model = net.Net(params).cuda() if params.cuda else net.Net(params)\n",
        "    model = net.Net(params)\n    if torch.cuda.device_count() > 1:\n        model = build(params)\n    model.cuda()\n",
    ).replace("from loops import train\n", "from loops import train\nfrom somewhere import build\n")
    assert _found(tmp_path, monkeypatch, {"net.py": NET, "train.py": built, "loops.py": LOOPS}) == []


# syncs12: a per-step loss module of another module fed the parts of a batch moved in a list comprehension
SLM = """
import torch
import torch.nn.functional as F


class DurationLoss(torch.nn.Module):
    def forward(self, preds, lengths):
        total = 0
        for pred, n in zip(preds, lengths):
            total = total + F.softplus(pred[:n]).mean()
        return total
"""

SLM_TRAIN = """
import torch
from torch.utils.data import DataLoader

from losses import DurationLoss

device = "cuda"
model = torch.nn.Linear(80, 80).to(device)
opt = torch.optim.Adam(model.parameters())
loader = DataLoader(range(100), batch_size=8, num_workers=4, pin_memory=True)


def main():
    criterion = DurationLoss()
    for step, batch in enumerate(loader):
        batch = [b.to(device, non_blocking=True) for b in batch]
        mels, lengths = batch
        loss = criterion(model(mels), lengths)
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
"""


def test_parts_of_a_batch_moved_in_a_list_comprehension_reach_another_modules_loss_on_the_gpu(tmp_path, monkeypatch):
    """`mels, lengths = [b.to(device) for b in batch]`: each part is on the GPU, so the loss module's slice by
    `lengths` waits at its own line, once per sample, with the loop that runs it named."""
    found = _found(tmp_path, monkeypatch, {"losses.py": SLM, "train.py": SLM_TRAIN})
    assert [(f, row, message) for f, row, _, message, _ in found] == [
        ("losses.py", 10, "`pred[:n]` (the slice bound `n` is a GPU tensor) waits for the GPU every training step "
         "(`forward` at line 7, run by the call at train.py:18)"),
    ]


def test_parts_of_a_batch_left_on_the_host_or_lengths_handed_as_ints_stay_silent(tmp_path, monkeypatch):
    unmoved = SLM_TRAIN.replace("[b.to(device, non_blocking=True) for b in batch]", "[b for b in batch]")
    assert _found(tmp_path, monkeypatch, {"losses.py": SLM, "train.py": unmoved}) == []
    on_cpu = SLM_TRAIN.replace('device = "cuda"', 'device = "cpu"')
    assert _found(tmp_path, monkeypatch, {"losses.py": SLM, "train.py": on_cpu}) == []
    host_lengths = SLM_TRAIN.replace("criterion(model(mels), lengths)", "criterion(model(mels), lengths_cpu)").replace(
        "        mels, lengths = batch\n", "        mels, lengths = batch\n        lengths_cpu = host[1]\n"
    ).replace("        batch = [b.to", "        host = batch\n        batch = [b.to")
    assert _found(tmp_path, monkeypatch, {"losses.py": SLM, "train.py": host_lengths}) == []


def test_a_slice_with_a_gpu_bound_is_reported_when_its_view_later_sizes_a_tensor(tmp_path, monkeypatch):
    """The slice gives a GPU view, not a host value: a size later read from the view is another read, and
    does not make the slice's own wait one the host needs."""
    sizing = SLICING.replace(
        "            loss = loss + mels[i, :, :lengths[i]].mean()",
        "            seg = mels[i, :, :lengths[i]]\n            k = int(seg.sum())\n"
        "            loss = loss + seg.mean() + torch.zeros(k, device=device).sum()",
    )
    found = _found(tmp_path, monkeypatch, {"train.py": sizing})
    assert [(row, message) for _, row, _, message, _ in found] == [
        (16, "`mels[i, :, :lengths[i]]` (the slice bound `lengths[i]` is a GPU tensor) waits for the GPU every "
         "training step (loop at line 12)"),
    ]
    # the value read to size the buffer stays the host's need (`sizes_a_tensor`): not reported
    host_sized = sizing.replace("seg = mels[i, :, :lengths[i]]", "seg = mels[i]")
    assert _found(tmp_path, monkeypatch, {"train.py": host_sized}) == []
