"""Fixes of GPU101, GPU102, GPU104 (and GPU105 after them) on one `DataLoader(...)` call compose into one
clean call in the layout the user wrote."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import findings, fixed

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

FAMILY = {"select": ("GPU1",), "rule_options": (("GPU101", (("workers", "4"),)),)}

TEMPLATE = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def train(ds, model, optimizer):
    loader = {call}
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            model(x.to(device), y.to(device)).backward()
            optimizer.step()
"""

LAYOUTS = {
    "single-line": (
        "DataLoader(ds, batch_size=64, shuffle=True)",
        "DataLoader(ds, batch_size=64, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True)",
    ),
    "one-per-line-trailing-comma": (
        "DataLoader(\n        ds,\n        batch_size=64,\n        shuffle=True,\n    )",
        "DataLoader(\n        ds,\n        batch_size=64,\n        shuffle=True,\n        num_workers=4,\n"
        "        pin_memory=True,\n        persistent_workers=True,\n    )",
    ),
    "one-per-line-no-trailing-comma": (
        "DataLoader(\n        ds,\n        batch_size=64,\n        shuffle=True\n    )",
        "DataLoader(\n        ds,\n        batch_size=64,\n        shuffle=True,\n        num_workers=4,\n"
        "        pin_memory=True,\n        persistent_workers=True\n    )",
    ),
    "hanging-indent": (
        "DataLoader(ds, batch_size=64,\n                        shuffle=True)",
        "DataLoader(ds, batch_size=64,\n                        shuffle=True,\n                        num_workers=4,\n"
        "                        pin_memory=True,\n                        persistent_workers=True)",
    ),
    "arguments-on-their-own-line": (
        "DataLoader(\n        ds, batch_size=64, shuffle=True\n    )",
        "DataLoader(\n        ds, batch_size=64, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True\n    )",
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_fixes_on_one_call_compose_in_the_users_layout(layout):
    before, after = LAYOUTS[layout]
    source = TEMPLATE.format(call=before)
    assert [f.split()[1] for f in findings(source, **FAMILY)] == ["GPU101", "GPU102"]
    result = fixed(source, **FAMILY)
    expected = TEMPLATE.format(call=after).replace(
        "x.to(device), y.to(device)", "x.to(device, non_blocking=True), y.to(device, non_blocking=True)"
    )
    assert result == expected
    assert fixed(result, **FAMILY) == result
    assert findings(result, **FAMILY) == []
    compile(result, "train.py", "exec")


def test_safe_fixes_alone_leave_the_unsafe_ones_and_stay_consistent():
    source = TEMPLATE.format(call="DataLoader(ds, batch_size=64, shuffle=True, num_workers=2)")
    result = fixed(source, unsafe=False, **FAMILY)
    # GPU102 is safe with workers, then GPU105 sees a pinned loader; GPU104 needs --unsafe-fixes.
    assert "num_workers=2, pin_memory=True)" in result
    assert "x.to(device, non_blocking=True)" in result
    assert [f.split()[1] for f in findings(result, **FAMILY)] == ["GPU104"]
    assert textwrap.dedent(result) == result
