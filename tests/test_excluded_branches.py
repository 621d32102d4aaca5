"""A wait behind a branch the call's own path has ruled out (`analysis/excluded_branches.py`; a wrong finding of the
seventeenth corpus): a model class picks its code by a setting fixed in `__init__`; the autoregressive sampler runs
only under `if self.parameterization == "ar":`, and its `self.forward(...)` reaches the boolean-mask read of the
`"subs"` branch never. Negatives beside it: the same call on a path where the setting is `"subs"`, on a path where
it is not known, and a setting that a method reassigns stay reported.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

SAMPLER = """
import torch
import torch.nn as nn
import lightning as L


class Diffusion(L.LightningModule):
    def __init__(self, parameterization):
        super().__init__()
        self.parameterization = parameterization
        self.backbone = nn.Linear(512, 512)
        self.mask_index = 3
        self.length = 1024

    def _subs(self, logits, xt):
        unmasked = xt != self.mask_index
        logits[unmasked] = 0.0
        return logits[unmasked]

    def forward(self, x):
        logits = self.backbone(x)
        if self.parameterization == "subs":
            return self._subs(logits, x)
        return logits

    def _ar_sampler(self, n):
        x = torch.zeros(n, 512, device="cuda")
        for i in range(self.length):
            x = self.forward(x)
        return x

    @torch.no_grad()
    def sample(self, n):
        if self.parameterization == "ar":
            return self._ar_sampler(n)
        return self.forward(torch.zeros(n, 512, device="cuda"))

    def validation_step(self, batch, batch_idx):
        return self.sample(batch.shape[0])
"""


def _gpu306(source: str, tmp_path, monkeypatch) -> list[str]:
    diagnostics = lint(write(tmp_path, {"sampler.py": source}), monkeypatch)
    return sorted(f for f in found(diagnostics) if f.endswith("GPU306"))


def _lines(source: str, code: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if code in line)


def test_a_sampler_reached_only_under_another_setting_does_not_report_the_subs_mask(tmp_path, monkeypatch):
    source = SAMPLER
    findings = _gpu306(source, tmp_path, monkeypatch)
    # `sample`'s own `self.forward(...)` (the other settings' path) still reaches the mask: reported at the step's call
    assert findings == [f"sampler.py:{_lines(source, 'return self.sample(batch.shape[0])')} GPU306"]


def test_the_same_call_where_the_setting_is_the_masked_one_stays_reported(tmp_path, monkeypatch):
    source = SAMPLER.replace('if self.parameterization == "ar":', 'if self.parameterization == "subs":')
    findings = _gpu306(source, tmp_path, monkeypatch)
    assert f"sampler.py:{_lines(source, 'x = self.forward(x)')} GPU306" in findings


def test_a_sampler_also_called_where_the_setting_is_unknown_stays_reported(tmp_path, monkeypatch):
    source = SAMPLER.replace("        return self.sample(batch.shape[0])", "        self._ar_sampler(batch.shape[0])\n        return self.sample(batch.shape[0])")
    findings = _gpu306(source, tmp_path, monkeypatch)
    assert f"sampler.py:{_lines(source, 'x = self.forward(x)')} GPU306" in findings


def test_a_setting_a_method_reassigns_is_not_known_on_the_path(tmp_path, monkeypatch):
    source = SAMPLER.replace(
        "    def _ar_sampler(self, n):\n", "    def switch(self):\n        self.parameterization = \"subs\"\n\n    def _ar_sampler(self, n):\n"
    )
    findings = _gpu306(source, tmp_path, monkeypatch)
    assert f"sampler.py:{_lines(source, 'x = self.forward(x)')} GPU306" in findings
