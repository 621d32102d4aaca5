"""An attribute the class's `__init__` sets to a literal and nothing ever changes (`self.stratified = False`)
keeps that value as the code ships (`analysis/shipped_paths.py`, `init_literal_held`): the branch it turns off
never runs, and its findings are dropped. Another store anywhere (a method, another object, `setattr`) leaves
the branch possible, and the finding stays.

The repro is a minimal shape of our own (issue 13, eleventh corpus class N1: a rectified-flow model's
stratified timestep sampling, off in `__init__`).
"""

from __future__ import annotations

import pytest

from tests.conftest import findings

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

MODEL = """\
import torch


class RF(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.stratified = {value}

    def forward(self, x):
        b = x.size(0)
        if self.stratified:
            t = torch.rand((b,)).to(x.device)
        else:
            t = torch.sigmoid(torch.randn((b,), device=x.device))
        return self.model(x, t)
{extra}

def main():
    rf = RF(torch.nn.Bilinear(8, 1, 8)).cuda()
    {setup}
    opt = torch.optim.Adam(rf.parameters())
    for step in range(1000):
        x = torch.randn(64, 8, device="cuda")
        loss = rf(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""


def found(value: str = "False", extra: str = "", setup: str = "pass") -> list[str]:
    return findings(MODEL.format(value=value, extra=extra, setup=setup), "rf.py")


def test_branch_turned_off_in_init_gets_no_finding() -> None:
    assert found() == []


@pytest.mark.parametrize(
    "value, extra, setup",
    [
        ("True", "", "pass"),  # on as shipped
        ("False", "\n    def enable(self):\n        self.stratified = True\n", "rf.enable()"),  # a method turns it on
        ("False", "", "rf.stratified = True"),  # set on the object from outside the class
        ("False", "", "setattr(rf, 'strati' + 'fied', True)"),  # set by a computed name
    ],
)
def test_attribute_that_may_be_on_keeps_the_finding(value: str, extra: str, setup: str) -> None:
    assert "13:17 GPU201" in found(value, extra, setup)
