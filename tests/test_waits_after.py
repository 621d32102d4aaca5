"""GPU306: a data-dependent size followed at once by another wait of the same iteration costs nothing of its own
(`step_waits.waited_after`; the seventeenth corpus's "sync-anyway" noise): the first wait drains the queue, the next
finds it nearly empty, and the host work between them is none beyond launches. Negatives: a wait two statements later
with a forward between, and a next wait that runs only on some steps, keep the finding.
"""

from __future__ import annotations

from tests.conftest import findings

SELECT = {"select": ("GPU306",)}

HEAD = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torch.nn.Linear(512, 512).to(device)
loader = DataLoader(torch.randn(100000, 512), batch_size=256, num_workers=8)
"""


def test_a_mask_followed_at_once_by_a_read_of_the_same_step_is_silent():
    source = HEAD + """\
with torch.no_grad():
    for x in loader:
        out = model(x.to(device, non_blocking=True))
        kept = out[out > 0]
        print(kept.sum().item())
"""
    assert findings(source, **SELECT) == []


def test_a_mask_followed_by_an_allclose_test_every_step_is_silent():
    source = HEAD + """\
with torch.no_grad():
    for x in loader:
        x = x.to(device, non_blocking=True)
        nxt = model(x)
        kept = nxt[nxt > 0]
        if not torch.allclose(nxt, x):
            x = nxt
"""
    assert findings(source, **SELECT) == []


def test_a_mask_with_a_forward_before_the_next_read_stays():
    source = HEAD + """\
with torch.no_grad():
    for x in loader:
        out = model(x.to(device, non_blocking=True))
        kept = out[out > 0]
        again = model(out)
        print(again.sum().item())
"""
    assert findings(source, **SELECT) == ["10:16 GPU306"]


def test_a_mask_whose_next_read_runs_on_some_steps_only_stays():
    source = HEAD + """\
with torch.no_grad():
    for step, x in enumerate(loader):
        out = model(x.to(device, non_blocking=True))
        kept = out[out > 0]
        if step % 100 == 0:
            print(kept.sum().item())
"""
    assert findings(source, **SELECT) == ["10:16 GPU306"]
