"""`loss.data[0]` in code written for PyTorch before 0.4 (`.cuda(async=True)`): indexing the one-element tensor of a
loss or a metric returns a Python number there, copied from the GPU, so GPU303 reports it every step like
`loss.item()`, in the module and through a helper of another module. In code not known to be that old the same
index is a GPU index (a 1-d tensor) or an error (a 0-dim loss, PyTorch 0.5+), never a host read: silent.
"""

from __future__ import annotations

from tests.conftest import UNPROVEN_COST_TOML, run_gpulint

OLD_TRAIN = """\
import torch
from torch.autograd import Variable

model = torch.nn.Linear(8, 10).cuda()
criterion = torch.nn.CrossEntropyLoss().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(train_queue, objs, top1):
    for step, (input, target) in enumerate(train_queue):
        input = Variable(input).cuda()
        target = Variable(target).cuda({copy})
        optimizer.zero_grad()
        logits = model(input)
        loss = criterion(logits, target)
        prec1 = logits.max(1)[1].eq(target).float().sum()
        top1.update(prec1.data[-1], input.size(0))
        loss.backward()
        optimizer.step()
        objs.update(loss.data[0], input.size(0))
        row = logits.data[0]
        loss.data[0] = 0
        if step % 50 == 0:
            print(objs.avg, top1.avg, row)
"""


def concise(tmp_path, files: dict[str, str], *paths: str) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--select", "GPU303", "--output-format", "concise", *(paths or ["."]), cwd=tmp_path)
    return [line for line in result.stdout.decode().splitlines()[:-1] if "invalid-syntax" not in line]


def full(tmp_path, name: str) -> str:
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--select", "GPU303", name, cwd=tmp_path)
    return result.stdout.decode()


def test_data_index_of_a_loss_and_a_metric_in_pytorch_03_code_waits_every_step(tmp_path):
    # `output.data[0]` (a row of the batch's logits) and the store `loss.data[0] = 0` are no reads. (The metric is
    # read before the backward pass: each read waits for work of its own, two findings.)
    assert concise(tmp_path, {"train.py": OLD_TRAIN.format(copy="async=True")}) == [
        "train.py:17:21: GPU303 `prec1.data[-1]` waits for the GPU every training step (loop at line 10)",
        "train.py:20:21: GPU303 `loss.data[0]` waits for the GPU every training step (loop at line 10)",
    ]


def test_the_help_says_why_and_gives_the_pytorch_04_spelling(tmp_path):
    concise(tmp_path, {"train.py": OLD_TRAIN.format(copy="async=True")})
    out = full(tmp_path, "train.py")
    assert (
        "help: Keep the value on the GPU and convert it only every N steps (under `if step % N == 0:`). `loss.data[0]` "
        "returns a Python number copied from the GPU on PyTorch before 0.4, which this code is written for (it copies "
        "with `async=`); from 0.4 on the same read is `loss.item()`"
    ) in out
    assert "from 0.4 on the same read is `prec1.item()`" in out


def test_the_same_index_in_code_on_pytorch_04_apis_is_silent(tmp_path):
    # `non_blocking=True`: PyTorch 0.4+, where `loss.data[0]` of a 0-dim loss returns the tensor (0.4) or raises
    # (0.5+), and on a 1-d tensor is a GPU index.
    assert concise(tmp_path, {"train.py": OLD_TRAIN.format(copy="non_blocking=True")}) == []
    assert concise(tmp_path, {"train.py": OLD_TRAIN.format(copy="")}) == []


def test_print_of_the_index_is_one_read(tmp_path):
    text = OLD_TRAIN.format(copy="async=True").replace("        objs.update(loss.data[0], input.size(0))\n", "        print(loss.data[0])\n")
    found = concise(tmp_path, {"train.py": text})
    assert found[1] == "train.py:20:15: GPU303 `loss.data[0]` waits for the GPU every training step (loop at line 10)"


HELPER = """\
import torch


def to_gpu(x):
    return x.cuda({copy})


def record(loss, meter, n):
    meter.update(loss.data[0], n)
"""

CALLER = """\
import torch

from meters import record, to_gpu

model = torch.nn.Linear(8, 10).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(loader, meter):
    for x, y in loader:
        x, y = to_gpu(x), to_gpu(y)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        record(loss, meter, x.size(0))
"""


def test_a_pytorch_03_helper_that_indexes_the_loss_waits_at_every_call(tmp_path):
    found = concise(tmp_path, {"meters.py": HELPER.format(copy="async=True"), "train.py": CALLER})
    assert found == [
        "train.py:16:9: GPU303 `record(loss, meter, x.size(0))` (`loss.data[0]` on PyTorch before 0.4 at meters.py:9) "
        "waits for the GPU every training step (loop at line 10)",
    ]


def test_the_same_helper_on_pytorch_04_apis_is_silent(tmp_path):
    assert concise(tmp_path, {"meters.py": HELPER.format(copy="non_blocking=True"), "train.py": CALLER}) == []
