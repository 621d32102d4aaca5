"""GPU101 on a loader whose step loop takes each batch from a new iterator (`x, y = next(iter(loader))` on every
pass, the vq-vae notebook of the sixth corpus): workers alone would make it slower, since each `iter()` starts
them again (or, with `persistent_workers=True`, first drains what they prefetched for the old iterator). The
finding says to keep one iterator across steps before adding workers, and offers no fix that adds them
(`loader_flow.LoaderFlow.restarted_each_step`; across modules the `("restart", loop)` effect of the project
summary, `project.Consumption.restarts`). A batch peeked once before the loop, and an iterator kept across
steps with a `StopIteration` refill, keep the usual finding and fix.
"""

from __future__ import annotations

import textwrap

from gpulint import api
from tests.conftest import diagnostics, findings, fixed, settings
from tests.projects_helper import lint, write
from tests.test_notebooks import notebook

FRESH_EACH_STEP = """\
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader


def main(data):
    device = torch.device("cuda")
    loader = DataLoader(data, batch_size=256, shuffle=True, pin_memory=True)
    model = nn.Linear(32, 10).to(device)
    opt = torch.optim.Adam(model.parameters())
    for step in range(15000):
        x, y = next(iter(loader))
        loss = F.cross_entropy(model(x.to(device, non_blocking=True)), y.to(device, non_blocking=True))
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main(load())
"""

RESTART_HELP = (
    "The GPU waits while the training process loads each batch; the loop at {where} takes each batch from a new "
    "iterator (`next(iter(...))`): with workers, every step would start them again (with `persistent_workers=True`, "
    "drain what they prefetched for the old iterator and still wait for the new one's first batch); keep one iterator "
    "across steps (`batches = iter(loader)` before the loop, `next(batches)` in it, a new one on `StopIteration`), "
    "then set `num_workers`"
)
USUAL_HELP = "The GPU waits while the training process loads each batch"
# GPU102 is silent on a loader GPU101 reports whose items are images made per item: GPU101 names pinning
PINNING_HELP = f"{USUAL_HELP}; with workers, also set `pin_memory=True` so that they pin the batches for the GPU copy"


def _gpu101(source: str):
    return [d for d in diagnostics(source, select=("GPU101",))]


# ---- one module ----------------------------------------------------------------------------------------


def test_a_fresh_iterator_each_step_is_told_to_keep_one_iterator_and_gets_no_workers_fix():
    [d] = _gpu101(FRESH_EACH_STEP)
    assert (d.location.row, d.message) == (9, "`DataLoader` has no `num_workers`: batches load in the training process")
    assert d.help == RESTART_HELP.format(where="line 12")
    assert d.fix is None
    assert fixed(FRESH_EACH_STEP, select=("GPU101",)) == FRESH_EACH_STEP


def test_a_while_loop_that_restarts_the_iterator_is_told_the_same():
    source = FRESH_EACH_STEP.replace("    for step in range(15000):\n", "    while True:\n")
    [d] = _gpu101(source)
    assert d.help == RESTART_HELP.format(where="line 12") and d.fix is None


def test_the_notebook_shape_names_the_cell_of_the_loop():
    cells = (
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n"
        'device = torch.device("cuda")',
        "training_loader = DataLoader(training_data, batch_size=256, shuffle=True, pin_memory=True)",
        "model = nn.Linear(32, 10).to(device)\noptimizer = torch.optim.Adam(model.parameters())",
        """\
        for i in range(15000):
            (data, _) = next(iter(training_loader))
            data = data.to(device)
            optimizer.zero_grad()
            loss = F.mse_loss(model(data), data)
            loss.backward()
            optimizer.step()
        """,
        "(train_originals, _) = next(iter(training_loader))\ntrain_originals = train_originals.to(device)",
    )
    report = api.check(api.Source(notebook(*cells), "nb.ipynb"), settings(select=("GPU101",)))
    [d] = report.diagnostics
    assert d.help == RESTART_HELP.format(where="cell 4, line 1")
    assert d.fix is None


# ---- negatives: the usual finding and fix stay ------------------------------------------------------------

WORKERS_FIX = "num_workers=min(8, max(1, (len(os.sched_getaffinity(0))"


PEEKED_ONCE = FRESH_EACH_STEP.replace(
    "    for step in range(15000):\n        x, y = next(iter(loader))\n",
    "    sample, _ = next(iter(loader))\n    print(sample.shape)\n    for x, y in loader:\n",
)


def test_a_batch_peeked_once_before_the_loop_keeps_the_usual_finding_and_fix():
    [d] = _gpu101(PEEKED_ONCE)
    assert (d.location.row, d.help) == (9, USUAL_HELP)
    assert WORKERS_FIX in fixed(PEEKED_ONCE, select=("GPU101",))


KEPT_ITERATOR = FRESH_EACH_STEP.replace(
    "    for step in range(15000):\n        x, y = next(iter(loader))\n",
    textwrap.indent(
        textwrap.dedent("""\
        batches = iter(loader)
        for step in range(15000):
            try:
                x, y = next(batches)
            except StopIteration:
                batches = iter(loader)
                x, y = next(batches)
        """),
        "    ",
    ),
)


def test_an_iterator_kept_across_steps_with_a_refill_keeps_the_usual_finding_and_fix():
    [d] = _gpu101(KEPT_ITERATOR)
    assert (d.location.row, d.help) == (9, USUAL_HELP)
    assert WORKERS_FIX in fixed(KEPT_ITERATOR, select=("GPU101",))


def test_the_pinning_and_copy_findings_of_the_same_loader_do_not_change():
    unpinned = FRESH_EACH_STEP.replace(", pin_memory=True", "")
    assert findings(unpinned) == ["9:14 GPU101", "9:14 GPU102"]
    assert findings(KEPT_ITERATOR.replace(", pin_memory=True", "")) == ["9:14 GPU101", "9:14 GPU102"]


# ---- across modules --------------------------------------------------------------------------------------

DATA = """\
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def get_loader(root):
    data = datasets.CIFAR10(root, train=True, download=True, transform=transforms.ToTensor())
    return DataLoader(data, batch_size=256, shuffle=True)
"""
TRAIN = """\
import torch
import torch.nn.functional as F
from torch import nn

from data import get_loader


def main():
    device = torch.device("cuda")
    loader = get_loader("data")
    model = nn.Linear(32, 10).to(device)
    opt = torch.optim.Adam(model.parameters())
    for step in range(15000):
        x, y = next(iter(loader))
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""
ENGINE = """\
import torch.nn.functional as F


def train(model, opt, loader, device, steps):
    for step in range(steps):
        x, y = next(iter(loader))
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
CALLER = """\
import torch
from torch import nn
from torch.utils.data import DataLoader

from engine import train

if __name__ == "__main__":
    device = torch.device("cuda")
    loader = DataLoader(load(), batch_size=256, shuffle=True, num_workers=0)
    model = nn.Linear(32, 10).to(device)
    train(model, torch.optim.Adam(model.parameters()), loader, device, 15000)
"""


def _project(tmp_path, monkeypatch, files: dict[str, str]):
    return [d for d in lint(write(tmp_path, files), monkeypatch, select=("GPU101",)) if d.code == "GPU101"]


def test_a_loader_returned_to_another_module_that_restarts_it_each_step(tmp_path, monkeypatch):
    [d] = _project(tmp_path, monkeypatch, {"data.py": DATA, "train.py": TRAIN})
    assert (d.filename, d.location.row) == ("data.py", 7)
    assert d.help == RESTART_HELP.format(where="train.py:13") and d.fix is None


def test_a_loader_handed_to_a_function_of_another_module_that_restarts_it_each_step(tmp_path, monkeypatch):
    [d] = _project(tmp_path, monkeypatch, {"engine.py": ENGINE, "caller.py": CALLER})
    assert (d.filename, d.location.row) == ("caller.py", 9)
    assert d.help == RESTART_HELP.format(where="engine.py:5") and d.fix is None


def test_another_module_that_keeps_one_iterator_keeps_the_usual_finding(tmp_path, monkeypatch):
    kept = TRAIN.replace(
        "    for step in range(15000):\n        x, y = next(iter(loader))\n",
        "    batches = iter(loader)\n    for step in range(15000):\n        try:\n            x, y = next(batches)\n"
        "        except StopIteration:\n            batches = iter(loader)\n            x, y = next(batches)\n",
    )
    [d] = _project(tmp_path, monkeypatch, {"data.py": DATA, "train.py": kept})
    assert (d.filename, d.location.row, d.help) == ("data.py", 7, USUAL_HELP)
    assert d.fix is not None


def test_another_module_that_peeks_once_before_its_loop_keeps_the_usual_finding(tmp_path, monkeypatch):
    peeked = TRAIN.replace(
        "    for step in range(15000):\n        x, y = next(iter(loader))\n",
        "    sample, _ = next(iter(loader))\n    print(sample.shape)\n    for x, y in loader:\n",
    )
    [d] = _project(tmp_path, monkeypatch, {"data.py": DATA, "train.py": peeked})
    assert (d.filename, d.location.row, d.help) == ("data.py", 7, PINNING_HELP)
    assert d.fix is not None
