"""GPU401 and `DataParallel` behind a switch the class leaves off (`analysis/opt_in_switches.py`): `if
self.data_parallel:` where the constructor sets `self.data_parallel = kwargs.get("data_parallel", False) and
torch.cuda.device_count() > 1`, or takes `data_parallel=False`, and its `--data_parallel` option is a
`store_true`. The documented run never wraps the model.

Shape after learn2learn's Lightning meta-learners (seventeenth corpus, both judges: wrong or noise). Negatives
beside it: the switch on by default, a call in the module that turns it on, an option that defaults to on, a
README near the module that passes the flag, and a switch read from the command line directly.
"""

from __future__ import annotations

from tests.projects_helper import lint_written

LEARNER = """
import argparse
import torch


class MetaLearner(torch.nn.Module):
    def __init__(self, model, **kwargs):
        super().__init__()
        self.model = model
        self.data_parallel = kwargs.get("data_parallel", DEFAULT) and torch.cuda.device_count() > 1

    @staticmethod
    def add_model_specific_args(parent):
        parser = argparse.ArgumentParser(parents=[parent], add_help=False)
        parser.add_argument("--data_parallel", OPTION)
        return parser

    def meta_learn(self, batch):
        learner = self.model
        if self.data_parallel:
            learner = torch.nn.DataParallel(learner)
        data, labels = batch
        loss = torch.nn.functional.cross_entropy(learner(data), labels)
        loss.backward()
        return loss.detach()

    def fit(self, loader, epochs):
        opt = torch.optim.Adam(self.parameters())
        for epoch in range(epochs):
            for x, y in loader:
                opt.zero_grad()
                self.meta_learn((x.cuda(), y.cuda()))
                opt.step()
"""

RUN = """
import torch
from lib.learner import MetaLearner


def main(loader):
    learner = MetaLearner(torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3), torch.nn.Flatten(), torch.nn.LazyLinear(5)).cuda())
    learner.fit(loader, 10)
"""


def _lint(tmp_path, monkeypatch, default="False", option='action="store_true"', extra="", **more) -> list[str]:
    learner = LEARNER.replace("DEFAULT", default).replace("OPTION", option) + extra
    files = {"lib/__init__.py": "", "lib/learner.py": learner, "run.py": RUN, **more}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU401"]


REPORTED = ["lib/learner.py:21 GPU401"]


def test_a_switch_the_class_leaves_off_is_silent(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch) == []


def test_a_parameter_that_defaults_to_off_is_silent(tmp_path, monkeypatch):
    learner = LEARNER.replace("model, **kwargs", "model, data_parallel=False").replace(
        'kwargs.get("data_parallel", DEFAULT)', "data_parallel"
    )
    files = {"lib/__init__.py": "", "lib/learner.py": learner.replace("OPTION", 'action="store_true"'), "run.py": RUN}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU401"] == []


def test_a_switch_on_by_default_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, default="True") == REPORTED


def test_a_call_that_turns_it_on_keeps_the_finding(tmp_path, monkeypatch):
    extra = "\n\ndef build(model):\n    return MetaLearner(model, data_parallel=True)\n"
    assert _lint(tmp_path, monkeypatch, extra=extra) == REPORTED


def test_an_option_on_by_default_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, option="type=bool, default=True") == REPORTED


def test_a_readme_that_passes_the_flag_keeps_the_finding(tmp_path, monkeypatch):
    readme = "Train on every GPU:\n\n    python run.py --data_parallel\n"
    assert _lint(tmp_path, monkeypatch, **{"lib/README.md": readme}) == REPORTED


def test_a_command_line_switch_read_directly_keeps_the_finding(tmp_path, monkeypatch):
    learner = LEARNER.replace("if self.data_parallel:", "if args.data_parallel:").replace(
        "def meta_learn(self, batch):", "def meta_learn(self, batch, args):"
    )
    files = {"lib/__init__.py": "", "lib/learner.py": learner.replace("DEFAULT", "False").replace("OPTION", 'action="store_true"'), "run.py": RUN}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU401"] == REPORTED
