"""Per-step code reached through calls (issue 14, points 5 and 6): helpers of the project called every step
that synchronize or copy, reported at the call in the loop with the helper's place.

The fixture project tests/projects/steps is shaped like research code: meters and metric helpers in
utils/, a Trainer class in engine.py whose loop calls them, and negatives beside each positive (a meter
that keeps GPU tensors, a helper that syncs only under its own interval guard, a helper of CPU values, a
call under `if step % 100 == 0:` and one after the loop).
"""

from __future__ import annotations

import pytest

from tests.projects_helper import copy_project, found, lint, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")


def test_research_project_helpers_reached_every_step(tmp_path, monkeypatch):
    root = copy_project("steps", tmp_path)
    diagnostics = lint(root, monkeypatch)
    assert found(diagnostics) == [
        "engine.py:21 GPU105",  # cuda_all((images, labels)): the parts of a pinned batch, copied in the helper
        "engine.py:23 GPU306",  # masked_loss: boolean-mask indexing in utils/tensors.py
        "engine.py:27 GPU303",  # self.losses.update(loss): ItemMeter.update calls `.item()`
        "engine.py:29 GPU303",  # log_scalars: `writer.add_scalar(tag, loss)` in the helper
        "engine.py:30 GPU303",  # loss_text + percent_text: one finding for the statement
        "engine.py:44 GPU105",  # to_device(batch, device) without non_blocking
        "engine.py:46 GPU303",  # meter.update(...) of a local ItemMeter
        "engine.py:47 GPU303",  # accuracy(...) calls `.item()`
        "engine.py:48 GPU306",  # positives(...) calls torch.nonzero
    ]
    by_line = {d.location.row: d for d in diagnostics}
    assert by_line[27].message.startswith(
        "`self.losses.update(loss, images.size(0))` (`.item()` at utils/meters.py:25) waits for the GPU every training step (loop at line 20)"
    )
    assert by_line[29].message.startswith("`log_scalars(self.writer, loss, step)` (`add_scalar()` of a tensor at utils/meters.py:36) waits")
    assert by_line[30].message.startswith(
        "`loss_text(loss)` (`str.format()` of a tensor at utils/meters.py:40) and `percent_text(loss)` "
        "(`%` formatting of a tensor at utils/meters.py:44) wait for the GPU every training step"
    )
    assert by_line[23].message.startswith(
        "`masked_loss(logits, labels)` runs boolean-mask indexing at utils/tensors.py:18, which makes the host wait for the GPU "
        "every training step (loop at line 20)"
    )
    assert by_line[48].message.startswith("`positives(logits)` runs `torch.nonzero()` at utils/tensors.py:13")
    assert "at utils/tensors.py:9 without `non_blocking=True`" in by_line[21].message
    assert by_line[21].fix is None  # the fix belongs in the helper, which other callers may use
    # Silent: self.smooth.update (AverageMeter keeps the tensor), report (syncs under its own `step % every`),
    # lr_text (CPU values), log_loss under `if step % 100 == 0:` and after the loop.


HELPERS = """
import torch


def log_loss(writer, loss, step):
    _write(writer, loss, step)


def _write(writer, loss, step):
    writer.add_scalar("loss", loss, step)


def show(loss):
    return "{:.3f}".format(loss)


def window(scores):
    return scores.unique()


def counted(lr, step):
    return "%d: %f" % (step, lr)
"""

LOOP = """
import torch
from helpers import log_loss, show, window, counted

device = torch.device("cuda")


def train(model, loader, optimizer, writer):
    model = model.to(device).train()
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log_loss(writer, loss, step)
        print(show(loss))
        window(out)
        counted(0.1, step)
        show(loss.item())
    show(loss)
"""


def test_helpers_two_levels_deep_and_their_negatives(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"helpers.py": HELPERS, "train.py": LOOP})
    diagnostics = lint(root, monkeypatch)
    assert found(diagnostics) == ["train.py:17 GPU303", "train.py:18 GPU303", "train.py:19 GPU306", "train.py:21 GPU303"]
    by_line = {d.location.row: d for d in diagnostics}
    # reached through `_write`, two calls away: the place named is where the value is turned into a number
    assert by_line[17].message.startswith("`log_loss(writer, loss, step)` (`add_scalar()` of a tensor at helpers.py:10)")
    assert by_line[18].message.startswith("`show(loss)` (`str.format()` of a tensor at helpers.py:14)")
    assert by_line[19].message.startswith("`window(out)` runs `.unique()` at helpers.py:18")
    # line 21 is `loss.item()` itself; `show` of the Python number it returns does not sync again
    assert by_line[21].message.startswith("`loss.item()` waits")
    # counted(0.1, step) formats CPU numbers; show(loss) after the loop runs once


def test_a_method_of_an_instance_is_followed_only_when_the_instance_is_known(tmp_path, monkeypatch):
    root = write(
        tmp_path / "p",
        {
            "meters.py": """
                class Meter:
                    def update(self, val):
                        self.last = float(val)


                class Other:
                    def update(self, val):
                        self.last = val
            """,
            "train.py": """
                import torch
                from meters import Meter, Other

                device = torch.device("cuda")


                def train(model, loader, optimizer, flag):
                    model = model.to(device)
                    meter = Meter()
                    either = Meter() if flag else Other()
                    for x, y in loader:
                        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        meter.update(loss)
                        either.update(loss)
            """,
        },
    )
    diagnostics = lint(root, monkeypatch)
    # `either` may be an `Other`, whose update does not sync: its call is not claimed. `Meter.update` runs every
    # step with the GPU loss (its `val` takes the residency of the project's calls): reported at its line, once
    assert found(diagnostics) == ["meters.py:4 GPU303"]
    assert diagnostics[0].message.startswith("`float(val)` waits for the GPU every training step (`update` at line 3, run by the call at train.py:17)")


def test_a_receiver_rebound_from_itself_is_not_followed(tmp_path, monkeypatch):
    # `x = x.next()` in a loop: the write that reaches `x.next()` is the call itself
    root = write(tmp_path / "p", {"walk.py": "import torch\n\n\ndef walk(x, loader):\n    for batch in loader:\n        x = x.next()\n        x.cuda()\n"})
    assert found(lint(root, monkeypatch)) == []


TIMING_MONITOR = """\
    import time

    import torch


    class Monitor:
        def __init__(self):
            self.times = {}

        def start_timing(self, name):
            torch.cuda.synchronize()
            self.times[name] = time.time()

        def end_timing(self, name):
            torch.cuda.synchronize()
            self.times[name] = time.time() - self.times[name]


    def wait_for_gpu():
        torch.cuda.synchronize()
"""
TIMED_TRAIN = """\
    import torch
    from monitor import Monitor, wait_for_gpu


    def train(model, loader, optimizer):
        monitor = Monitor()
        model.cuda()
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            monitor.start_timing("forward")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            monitor.end_timing("forward")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()


    def train_plain(model, loader, optimizer):
        model.cuda()
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            wait_for_gpu()
"""


def test_a_timing_helper_synchronizes_to_measure_and_is_not_reported(tmp_path, monkeypatch):
    """`monitor.start_timing()` is `synchronize(); t = time.time()`: removing the sync breaks the timing it
    exists for, and a loop that times its phases through such a helper is timing code (its own synchronize before
    reading the peak memory too). A helper that only synchronizes is still reported in a loop that times nothing."""
    import textwrap

    from gpulint.config import Settings
    from gpulint.linter import lint_files

    for name, text in {"monitor.py": TIMING_MONITOR, "train.py": TIMED_TRAIN}.items():
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    results = lint_files(sorted(tmp_path.glob("*.py")), Settings(root=tmp_path), jobs=1, use_cache=False)
    found = sorted(f"{d.filename}:{d.location.row} {d.code}" for r in results for d in r.diagnostics if d.code == "GPU304")
    assert found == ["train.py:28 GPU304"]
