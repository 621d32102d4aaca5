"""GPU103 and loaders whose every item is a whole step's input (`item_sizes.squeezes_the_batch_away`): the step
squeezes the batch dimension away (`data.squeeze(0)`), in the loop or in a function of the module the loop hands
the batch to, so `batch_size=1` is the code's design.

Shape after learn2learn's prototypical-network example (seventeenth corpus, both judges: wrong): a task set of
another library yields one N-way K-shot task per item; `fast_adapt(model, batch, ...)` unpacks it, moves it and
squeezes dimension 0 before the model. Negatives: the same step without the squeeze, a squeeze of another
dimension, a squeeze of something that is not the batch, and a batch size that is written (not 1).
"""

from __future__ import annotations

from tests.projects_helper import lint_written

TASKS = """
import torch
from torch.utils.data import Dataset


class Tasks(Dataset):
    def __init__(self, images, ways, shots):
        self.images, self.ways, self.shots = images, ways, shots

    def __len__(self):
        return 20000

    def __getitem__(self, i):
        classes = torch.randperm(len(self.images))[: self.ways]
        data = torch.stack([self.images[c][: self.shots] for c in classes]).flatten(0, 1)
        labels = torch.arange(self.ways).repeat_interleave(self.shots)
        return data, labels
"""


def script(squeeze: str = "data.squeeze(0)", loader: str = "DataLoader(tasks, shuffle=True)") -> str:
    return f"""
import torch
from torch.utils.data import DataLoader
from lib.tasks import Tasks


def fast_adapt(model, batch, ways, device):
    data, labels = batch
    data = data.to(device)
    labels = labels.to(device).view(-1)
    embeddings = model({squeeze})
    return torch.nn.functional.cross_entropy(embeddings[:, :ways], labels)


def main(images, device):
    tasks = Tasks(images, 5, 16)
    loader = {loader}
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 84 * 84, 64)).to(device)
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(100):
        for i in range(100):
            batch = next(iter(loader))
            loss = fast_adapt(model, batch, 5, device)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def _lint(tmp_path, monkeypatch, text: str) -> list[str]:
    files = {"lib/__init__.py": "", "lib/tasks.py": TASKS, "run.py": text}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU103"]


REPORTED = ["run.py:17 GPU103"]


def test_a_squeezed_task_batch_is_batch_one_by_design(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script()) == []


def test_squeezed_in_the_loop_itself(tmp_path, monkeypatch):
    text = script().replace("loss = fast_adapt(model, batch, 5, device)", "data, labels = batch\n            loss = model(data.cuda().squeeze(dim=0)).sum()")
    assert _lint(tmp_path, monkeypatch, text) == []


def test_no_squeeze_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script(squeeze="data")) == REPORTED


def test_another_dimension_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script(squeeze="data.squeeze(1)")) == REPORTED


def test_a_squeeze_of_something_else_keeps_the_finding(tmp_path, monkeypatch):
    text = script(squeeze="data").replace("labels = labels.to(device).view(-1)", "labels = labels.to(device).view(-1)\n    ways = torch.tensor([ways]).squeeze(0)")
    assert _lint(tmp_path, monkeypatch, text) == ["run.py:18 GPU103"]


def test_a_written_small_batch_size_keeps_the_finding(tmp_path, monkeypatch):
    text = script(loader="DataLoader(tasks, batch_size=4, shuffle=True)")
    assert [f.split()[-1] for f in _lint(tmp_path, monkeypatch, text)] == ["GPU103"]


# Shape after a time-series step (twenty-third corpus, both judges: wrong): each item is already a batch of windows
# (`self.data[i * n:(i + 1) * n]`), and the step squeezes every field at once.
def map_squeezed(squeeze: str) -> str:
    line = "data, labels = batch\n    data = data.to(device)\n    labels = labels.to(device).view(-1)\n    embeddings = model(data.squeeze(0))"
    return script().replace(line, f"data, labels = {squeeze}\n    labels = labels.view(-1)\n    embeddings = model(data)")


def test_each_field_squeezed_through_map_is_batch_one_by_design(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, map_squeezed("map(lambda x: x.to(device).squeeze(0), batch)")) == []


def test_each_field_squeezed_in_a_comprehension_is_batch_one_by_design(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, map_squeezed("[x.to(device).squeeze(0) for x in batch]")) == []


def test_a_map_that_does_not_squeeze_the_batch_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, map_squeezed("map(lambda x: x.to(device).squeeze(1), batch)")) == ["run.py:16 GPU103"]
    assert _lint(tmp_path, monkeypatch, map_squeezed("map(lambda x: x.to(device), batch)")) == ["run.py:16 GPU103"]
    other = "map(lambda x: x.to(device).squeeze(0), (torch.ones(1, 3, 84, 84), torch.ones(1, 80)))"
    assert _lint(tmp_path, monkeypatch, map_squeezed(other)) == ["run.py:16 GPU103"]
