"""The JSON outputs carry a finding's related places (the later reads of a GPU303 run), so tools and the recall
scorer see every line a finding names; a finding without related places has no `related` key."""

from __future__ import annotations

from tests.conftest import UNPROVEN_COST_TOML

import json

TRAIN = """\
import timm
import torch
from torch.utils.data import DataLoader
from torchvision import datasets

model = timm.create_model("resnet50").cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(datasets.ImageFolder("data"), batch_size=64, num_workers=8, pin_memory=True)
for epoch in range(10):
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        total = loss.item()
        twice = loss.item() * 2
"""


def test_json_and_json_lines_name_the_later_reads_of_a_run(gpulint, tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML)
    records = json.loads(gpulint("check", "--output-format", "json", "train.py", cwd=tmp_path).stdout)
    by_code = {r["code"]: r for r in records}
    assert sorted(by_code) == ["GPU104", "GPU303"]
    assert "related" not in by_code["GPU104"]
    assert by_code["GPU303"]["location"] == {"row": 14, "column": 17}
    assert by_code["GPU303"]["related"] == [
        {"message": "the training loop", "location": {"row": 10, "column": 5}, "cell": None},
        {"message": "then `loss.item()`, with only light GPU work queued since", "location": {"row": 15, "column": 17},
         "cell": None},
    ]
    lines = gpulint("check", "--output-format", "json-lines", "train.py", cwd=tmp_path).stdout.decode().splitlines()
    assert [json.loads(line).get("related") for line in lines] == [None, by_code["GPU303"]["related"]]
