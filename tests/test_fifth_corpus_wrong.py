"""The fifth held-out corpus's wrong-finding classes, each a fact of the semantic model (minimal shapes of
our own, next to the shapes that stay reported):

- module-level residency follows rebinding: `net.to("cuda:0")` in one cell moves THAT module; a later
  `net = create_net()` binds a new CPU module (`residency.Residency._rebound_after`);
- a loop that trains on element `[0]` of each batch feeds an unbatched model: a larger batch size would drop
  the other samples (`loader_flow.LoaderFlow.trains_on_first_sample`);
- a loader handed to a trainer run with `cpu=True` (and the same trainer's other methods) stays on the CPU,
  whatever `device=x.device` factories the model has (`loader_flow.LoaderFlow.trained_on_cpu_by_switch`);
- a project helper that enters DDP's `no_sync()` of the module it is given (edm's `misc.ddp_sync`) skips
  the all-reduce like `no_sync()` itself (the `("no_sync", where)` effect of `project.Callee.effects`);
- a dataset of in-memory strings (defined in another module) is not pinned.
"""

from __future__ import annotations

from gpulint import api
from gpulint.reporters import ReportContext, render
from tests.conftest import findings, settings
from tests.projects_helper import lint_written
from tests.test_notebooks import notebook

# ---- 1. residency follows rebinding ----------------------------------------------------------------

MOVED_CELL = """\
import torch
import torch.nn.functional as F
from torch import nn

net = nn.Linear(8, 2)
net.to("cuda:0")
"""
CPU_SECTION = """\
net = nn.Linear(8, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x, y in dl:
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(loss.item())
"""


def _notebook_findings(*cells: str, select=("GPU303",)) -> list[str]:
    report = api.check(api.Source(notebook(*cells), "nb.ipynb"), settings(select=select))
    return render("concise", report.diagnostics, ReportContext(sources=report.sources)).splitlines()


def test_a_name_rebound_to_a_new_module_after_an_in_place_move_is_on_the_cpu():
    assert _notebook_findings(MOVED_CELL, CPU_SECTION) == []
    assert findings(MOVED_CELL + CPU_SECTION, select=("GPU303",)) == []


def test_the_moved_module_itself_stays_on_the_gpu():
    # No rebinding: the section trains the module the first cell moved.
    section = CPU_SECTION.replace("net = nn.Linear(8, 2)\n", "")
    assert findings(MOVED_CELL + section, select=("GPU303",)) == ["13:11 GPU303"]
    # Rebound, then moved again: the move after the rebinding places the new module.
    moved_again = CPU_SECTION.replace("net = nn.Linear(8, 2)\n", "net = nn.Linear(8, 2)\nnet.cuda()\n")
    assert findings(MOVED_CELL + moved_again, select=("GPU303",)) == ["15:11 GPU303"]
    # Rebound to a wrapper of the moved module: still the module on the GPU.
    for wrapped in ("net = torch.compile(net)\n", "net = nn.DataParallel(net)\n"):
        section = CPU_SECTION.replace("net = nn.Linear(8, 2)\n", wrapped)
        assert findings(MOVED_CELL + section, select=("GPU303",)) == ["14:11 GPU303"], wrapped


# ---- 2. an unbatched model fed element [0] of each batch ---------------------------------------------

UNBATCHED = """\
import torch
from torch import nn
from torch.utils.data import DataLoader

BATCH_SIZE = 1
model = nn.GRU(8, 8).cuda()
opt = torch.optim.Adam(model.parameters())


def train(line):
    loss = model(torch.randn(len(line), 1, 8).cuda())[0].sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


loader = DataLoader(Lines(), batch_size=BATCH_SIZE, shuffle=True)
for epoch in range(10):
    for i, (lines, _) in enumerate(loader):
        loss = train(lines[0])
        if i % 100 == 0:
            print(i * len(lines), loss)
"""


def test_a_loop_that_trains_on_batch_element_zero_is_not_told_to_raise_the_batch_size():
    assert findings(UNBATCHED, select=("GPU103",)) == []
    pairs = UNBATCHED.replace("(lines, _)", "(srcs, targets)").replace("train(lines[0])", "train(srcs[0] + targets[0])")
    assert findings(pairs.replace("len(lines)", "len(srcs)"), select=("GPU103",)) == []


def test_a_loop_that_trains_on_the_whole_batch_is_still_told():
    assert findings(UNBATCHED.replace("train(lines[0])", "train(lines)"), select=("GPU103",)) == ["18:10 GPU103"]
    # Element [0] for one thing, the whole batch for another: the batch is used.
    both = UNBATCHED.replace("print(i * len(lines), loss)", "print(lines, loss)")
    assert findings(both, select=("GPU103",)) == ["18:10 GPU103"]
    # `batch[0]` of a batch not unpacked is the first field of a tuple batch (`TensorDataset(x)`), all samples.
    fields = UNBATCHED.replace("for i, (lines, _) in enumerate(loader):", "for i, lines in enumerate(loader):")
    assert findings(fields, select=("GPU103",)) == ["18:10 GPU103"]


# ---- 3. a trainer run with cpu=True -----------------------------------------------------------------

CPU_FIT = """\
import torch
from torch import nn
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        mask = torch.ones(x.shape[0], 1, device=x.device)
        lengths = x.count_nonzero(1).cpu()
        return self.fc(x) * mask, lengths


class Rows(torch.utils.data.Dataset):
    def __init__(self, frame):
        self.frame = frame

    def __len__(self):
        return len(self.frame)

    def __getitem__(self, i):
        return self.frame.iloc[i].to_numpy()


net = Net()
print(torch.cuda.is_available())
dl_train = DataLoader(Rows(frame), batch_size=128, shuffle=True)
dl_val = DataLoader(Rows(frame), batch_size=128)
model = KerasModel(net, loss_fn=nn.BCEWithLogitsLoss(), optimizer=torch.optim.Adam(net.parameters()))
model.fit(train_data=dl_train, val_data=dl_val, epochs=100, cpu=True)
model.evaluate(dl_val)
dl_val = model.accelerator.prepare(dl_val)
with torch.no_grad():
    result = torch.cat([model.forward(t)[0] for t in dl_val])
"""


def test_loaders_of_a_trainer_run_with_cpu_true_get_no_worker_advice():
    assert findings(CPU_FIT, select=("GPU101", "GPU102", "GPU104")) == []


def test_the_same_trainer_without_the_cpu_switch_is_still_told():
    assert findings(CPU_FIT.replace(", cpu=True", ""), select=("GPU101",)) == ["30:12 GPU101", "31:10 GPU101"]
    # The switch on another object does not cover this trainer.
    other = CPU_FIT.replace(", cpu=True", "") + "baseline.fit(train_data=None, cpu=True)\n"
    assert findings(other, select=("GPU101",)) == ["30:12 GPU101", "31:10 GPU101"]


# ---- 4. a project helper that enters no_sync --------------------------------------------------------

MISC = """\
import contextlib

from torch.nn.parallel import DistributedDataParallel as DDP


@contextlib.contextmanager
def ddp_sync(module, sync):
    if sync or not isinstance(module, DDP):
        yield
    else:
        with module.no_sync():
            yield
"""
LOOP = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import misc


def train(net, it, rounds, opt):
    ddp = DDP(net.cuda())
    for step in range(1000):
        opt.zero_grad()
        for r in range(rounds):
            with misc.ddp_sync(ddp, r == rounds - 1):
                ddp(next(it).cuda()).sum().backward()
        opt.step()
"""


def test_a_project_helper_that_enters_no_sync_skips_the_all_reduce(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"misc.py": MISC, "loop.py": LOOP}, monkeypatch) == []


def test_a_helper_that_only_looks_like_it_is_still_reported(tmp_path, monkeypatch):
    lookalike = MISC.replace("with module.no_sync():", "with contextlib.nullcontext():")
    assert "loop.py:13 GPU406" in lint_written(tmp_path, {"misc.py": lookalike, "loop.py": LOOP}, monkeypatch)


# ---- 5. a dataset of strings defined in another module ------------------------------------------------

NAMES = """\
import csv
import gzip

from torch.utils.data import Dataset


class Names(Dataset):
    def __init__(self, path):
        with gzip.open(path, "rt") as f:
            rows = list(csv.reader(f))
        self.names = [row[0] for row in rows]
        self.labels = [row[1] for row in rows]

    def __getitem__(self, index):
        return self.names[index], self.labels[index]

    def __len__(self):
        return len(self.names)
"""
TRAIN = """\
import torch
from torch import nn
from torch.utils.data import DataLoader

from names import Names

model = nn.EmbeddingBag(128, 18).cuda()
opt = torch.optim.Adam(model.parameters())


def encode(names, labels):
    x = torch.tensor([[ord(c) for c in n[:8].ljust(8)] for n in names])
    return x.cuda(), torch.tensor([hash(l) % 18 for l in labels]).cuda()


loader = DataLoader(Names("names.csv.gz"), batch_size=256, shuffle=True)
for epoch in range(100):
    for names, labels in loader:
        x, y = encode(names, labels)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_loader_of_in_memory_strings_gets_no_pinning_or_worker_advice(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"names.py": NAMES, "train.py": TRAIN}, monkeypatch) == []


# ---- 6. a device that is MPS or the CPU is never CUDA ------------------------------------------------

MPS_OR_CPU = """\
import torch
from torch import nn
from torch.utils.data import DataLoader

device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
net = nn.Sequential(nn.Conv2d(1, 64, 3), nn.Flatten(), nn.LazyLinear(10)).to(device)
opt = torch.optim.Adam(net.parameters())
loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=2)
for epoch in range(20):
    for features, labels in loader:
        loss = nn.functional.cross_entropy(net(features.to(device)), labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_device_chosen_between_mps_and_the_cpu_gets_no_cuda_advice():
    # the Mac M1 lesson: unified memory, so pinning buys nothing and TF32 / cuDNN / fused Adam do not apply;
    # workers restarted every epoch cost the same on any device
    assert findings(MPS_OR_CPU, select=("ALL",), preview=True) == ["8:10 GPU104"]


def test_a_device_chosen_between_cuda_and_the_cpu_is_still_cuda():
    cuda = MPS_OR_CPU.replace('"mps" if torch.backends.mps.is_available()', '"cuda" if torch.cuda.is_available()')
    assert {f.split()[1] for f in findings(cuda, select=("ALL",), preview=True)} >= {"GPU102", "GPU104", "GPU901", "GPU904"}
