"""Three classes of wrong findings from the fourth held-out corpus's judging, each a fact of the semantic model:

- an adversarial evaluation needs autograd: a loop after `model.eval()` that attacks its inputs
  (`adversary.perturb(x, y)` on an attack object, or a project method whose summary runs backward) is no
  GPU405, since `no_grad()` would break the attack (`analysis/gradients.needs_gradients`);
- a device chosen by the process group's backend (`"cpu" if backend == "gloo" else "cuda"`) is not known to
  be the GPU: an `all_gather` helper that reads sizes of such tensors is no GPU303 at its calls, while a
  helper syncing on a CUDA tensor stays found (`analysis/communication.chosen_by_backend`);
- a step timer held in an object (`torch.cuda.synchronize(); train_meter.iter_toc()`, `self.iter_timer.pause()`)
  reads a clock: the loop is timing code and its synchronize no GPU304 (`summary.times_a_step`).

The repros are minimal shapes of our own; the findings next to them stay.
"""

from __future__ import annotations

from tests.conftest import diagnostics
from tests.projects_helper import found, lint, write

EVAL = """\
import torch
from torch import nn
from advertorch.attacks import LinfPGDAttack

device = torch.device("cuda")
model = nn.Linear(10, 2).to(device)
{setup}


def evaluate(loader):
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        {attack}
        out = model(x)
        correct += (out.argmax(1) == y).sum()
    return correct
"""


def findings(source: str, select: tuple[str, ...]) -> list[str]:
    """`row:col CODE message` for each finding."""
    return [f"{d.location.row}:{d.location.column} {d.code} {d.message}" for d in diagnostics(source, select=select)]


def gpu405(setup: str, attack: str) -> list[str]:
    return findings(EVAL.format(setup=setup, attack=attack), select=("GPU405",))


def test_an_evaluation_under_attack_needs_autograd():
    assert gpu405("adversary = LinfPGDAttack(model, eps=0.03)", "x = adversary.perturb(x, y)") == []
    assert gpu405("atk = torchattacks.PGD(model, eps=8 / 255)", "x = atk(x, y)") == []
    assert gpu405("adversary = FGSM(model)", "x = adversary.attack(x, y)") == []


def test_an_evaluation_beside_an_attack_is_still_reported():
    message = "16:15 GPU405 `model` runs in a loop after `model.eval()` with autograd on"
    # the attack runs before the loop, and its object is not called in it
    assert [f for f in gpu405("adversary = LinfPGDAttack(model, eps=0.03)", "x = x.float()") if "GPU405" in f] == [
        f for f in gpu405("metric = Accuracy()", "metric.update(x, y)")
    ]
    assert gpu405("metric = Accuracy()", "metric.update(x, y)")[0].endswith(message)
    # a domain-adversarial model is a model, not an attack
    assert gpu405("net = DomainAdversarialNet()", "x = net(x)")[0].endswith(message)


def test_an_attack_method_of_a_project_class_that_runs_backward(tmp_path, monkeypatch):
    root = write(tmp_path, {
        "attacks.py": """\
            import torch
            from torch import nn


            class InputGradients:
                def __init__(self, model):
                    self.model = model

                def compute(self, x, y):
                    x = x.clone().requires_grad_(True)
                    loss = nn.functional.cross_entropy(self.model(x), y)
                    loss.backward()
                    return x + 0.01 * x.grad.sign()

                def describe(self, x):
                    return x.shape
            """,
        "evaluate.py": """\
            import torch
            from torch import nn

            from attacks import InputGradients

            model = nn.Linear(10, 2).cuda()


            def robust(loader):
                attacker = InputGradients(model)
                model.eval()
                for x, y in loader:
                    x = attacker.compute(x.cuda(), y.cuda())
                    out = model(x)


            def clean(loader):
                attacker = InputGradients(model)
                model.eval()
                for x, y in loader:
                    attacker.describe(x)
                    out = model(x.cuda())
            """,
    })  # fmt: skip
    assert [f for f in found(lint(root, monkeypatch)) if "GPU405" in f] == ["evaluate.py:22 GPU405"]


DIST_UTIL = """\
import pickle

import torch
import torch.distributed as dist


def _serialize_to_tensor(data, group):
    device = torch.device("cpu" if dist.get_backend(group) == "gloo" else "cuda")
    storage = torch.ByteStorage.from_buffer(pickle.dumps(data))
    return torch.ByteTensor(storage).to(device=device)


def _sizes(tensor, group):
    local_size = torch.tensor([tensor.numel()], dtype=torch.int64, device=tensor.device)
    size_list = [torch.zeros([1], dtype=torch.int64, device=tensor.device) for _ in range(dist.get_world_size(group))]
    dist.all_gather(size_list, local_size, group=group)
    return [int(size.item()) for size in size_list]


def all_gather_unaligned(data, group=None):
    tensor = _serialize_to_tensor(data, group)
    return max(_sizes(tensor, group))


def sizes_on_gpu(data):
    return int(torch.tensor([len(data)], device="cuda").item())


def read_loss(loss):
    return loss.item()


def _serialize_where_available(data):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    storage = torch.ByteStorage.from_buffer(pickle.dumps(data))
    return torch.ByteTensor(storage).to(device=device)


def gather_available(data, group=None):
    tensor = _serialize_where_available(data)
    return max(_sizes(tensor, group))
"""

TRAIN = """\
import torch
from torch import nn

import dist_util as du

model = nn.Linear(10, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(loader):
    for x, y in loader:
        preds = model(x.cuda())
        loss = nn.functional.cross_entropy(preds, y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        du.all_gather_unaligned(preds.detach().cpu().numpy())
        du.all_gather_unaligned([1, 2])
        du.sizes_on_gpu([1, 2])
        du.read_loss(loss)
        du.gather_available([1, 2])
"""


def test_a_gather_helper_over_a_gloo_group_is_no_sync_at_its_calls(tmp_path, monkeypatch):
    root = write(tmp_path, {"dist_util.py": DIST_UTIL, "train.py": TRAIN})
    diagnostics = [d for d in lint(root, monkeypatch) if d.code == "GPU303" and d.filename.endswith("train.py")]
    # line 17: the `.cpu()` of the predictions is the sync, the helper's size reads are not; a device chosen by
    # CUDA's availability (line 21) stays the GPU
    assert [(d.location.row, d.location.column) for d in diagnostics] == [(17, 33), (19, 9), (20, 9), (21, 9)]
    assert "`.item()` at" not in diagnostics[0].message
    assert "`du.sizes_on_gpu([1, 2])` (`.item()` at dist_util.py:26)" in diagnostics[1].message


TIMED = """\
import torch
from torch import nn

model = nn.Linear(10, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_epoch(loader, train_meter, timer):
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        {timing}
"""


def gpu304(timing: str) -> list[str]:
    return findings(TIMED.format(timing=timing), select=("GPU304",))


def test_a_synchronize_that_closes_a_step_timer_is_timing_code():
    assert gpu304("train_meter.iter_toc()") == []
    assert gpu304("timer.pause()") == []
    assert gpu304("train_meter.toc()") == []


def test_a_synchronize_beside_other_meter_calls_is_still_reported():
    message = "14:9 GPU304 `torch.cuda.synchronize()` blocks the CPU until the GPU is idle, every training step (loop at line 9)"
    assert gpu304("train_meter.update_stats(loss)")[0].endswith(message)
    assert gpu304("train_meter.stop()")[0].endswith(message)  # `stop` of a meter, not of a timer
    assert gpu304("train_meter.protocol()")[0].endswith(message)  # `toc` only as a word of its own


def test_a_project_meter_whose_method_pauses_a_timer(tmp_path, monkeypatch):
    root = write(tmp_path, {
        "meters.py": """\
            from fvcore.common.timer import Timer


            class TrainMeter:
                def __init__(self):
                    self.iter_timer = Timer()
                    self.losses = []

                def finish_step(self):
                    self.iter_timer.pause()

                def update(self, loss):
                    self.losses.append(loss)
            """,
        "train.py": """\
            import torch
            from torch import nn

            from meters import TrainMeter


            class Trainer:
                def __init__(self):
                    self.model = nn.Linear(10, 2).cuda()
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                    self.train_meter = TrainMeter()

                def fit(self, loader):
                    for x, y in loader:
                        loss = nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                        torch.cuda.synchronize()
                        self.train_meter.finish_step()

                def fit_logged(self, loader):
                    for x, y in loader:
                        loss = nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
                        torch.cuda.synchronize()
                        self.train_meter.update(1.0)
            """,
    })  # fmt: skip
    assert [f for f in found(lint(root, monkeypatch)) if "GPU304" in f] == ["train.py:28 GPU304"]


def test_a_tensor_on_a_device_the_process_group_picks_is_not_known_to_be_on_the_gpu():
    source = (
        "import torch\nimport torch.distributed as dist\nfrom torch import nn\n\n"
        "model = nn.Linear(10, 2).cuda()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        'group_device = torch.device("cpu" if dist.get_backend() == "gloo" else "cuda")\n'
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n\n'
        "def train(loader):\n    for x, y in loader:\n"
        "        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())\n"
        "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n"
        "        count = torch.tensor([len(x)], device=group_device)\n        dist.all_reduce(count)\n        total = count.item()\n"
        "        on_gpu = torch.tensor([len(x)], device=device)\n        print(on_gpu.item())\n"
    )
    assert source.count("\n") == 21
    assert findings(source, select=("GPU303",)) == [
        "21:15 GPU303 `on_gpu.item()` waits for the GPU every training step (loop at line 12)"
    ]
