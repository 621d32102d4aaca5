"""Loaders followed into a generator that restarts them forever, into methods of an object this module built,
and through absl flags (issue 14, thirteenth corpus class D: pytorch-ddpm's `infiniteloop`, BiSeNet's evaluators
called on the pinned loader), with the shapes that stay silent."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, lint_written, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

# ---- a generator that re-iterates the loader forever, read with next() in the step loop ----------------------

_INFINITE = """
    import torch
    from absl import app, flags
    from torch.utils.data import DataLoader

    FLAGS = flags.FLAGS
    flags.DEFINE_integer("num_workers", 4, help="workers of the DataLoader")
    flags.DEFINE_integer("total_steps", 800000, help="steps")


    def infiniteloop(dataloader):
        while True:
            for x, y in iter(dataloader):
                yield x


    def train(dataset, net):
        dataloader = DataLoader(dataset, batch_size=128, shuffle=True, num_workers=FLAGS.num_workers{extra})
        datalooper = infiniteloop(dataloader)
        net.cuda()
        optim = torch.optim.Adam(net.parameters())
        for step in range(FLAGS.total_steps):
            optim.zero_grad()
            x_0 = next(datalooper).to("cuda")
            loss = net(x_0).mean()
            loss.backward()
            optim.step()


    def main(argv):
        train(torchvision.datasets.CIFAR10("./data"), UNet())


    if __name__ == "__main__":
        app.run(main)
"""


def test_a_generator_restarting_the_loader_forever_restarts_its_workers(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"main.py": _INFINITE.format(extra="")}), monkeypatch)
    assert found(diagnostics) == ["main.py:18 GPU102", "main.py:18 GPU104"]
    workers = diagnostics[1]
    # the generator's `while True` runs one pass over the loader after another: each pass starts 4 workers again
    assert workers.message == "`DataLoader` workers are shut down and started again for every pass of the loop at line 12"
    # `--num_workers=0` must still run: the flag's value decides
    assert [e.content for e in workers.fix.edits] == [", persistent_workers=FLAGS.num_workers > 0"]


def test_persistent_pinned_workers_behind_the_generator_stay_silent(tmp_path, monkeypatch):
    source = _INFINITE.format(extra=", pin_memory=True, persistent_workers=True").replace('.to("cuda")', '.to("cuda", non_blocking=True)')
    assert lint_written(tmp_path, {"main.py": source}, monkeypatch) == []


def test_a_generator_that_passes_over_the_loader_once_restarts_nothing(tmp_path, monkeypatch):
    # no loop around the generator's own loop: one pass, the workers start once
    source = _INFINITE.format(extra=", pin_memory=True").replace("        while True:\n            for", "        if True:\n            for")
    source = source.replace('.to("cuda")', '.to("cuda", non_blocking=True)')
    assert lint_written(tmp_path, {"main.py": source}, monkeypatch) == []


def test_a_generator_over_a_list_of_tensors_says_nothing(tmp_path, monkeypatch):
    source = _INFINITE.format(extra="").replace(
        "DataLoader(dataset, batch_size=128, shuffle=True, num_workers=FLAGS.num_workers)", "[torch.randn(128, 3, 32, 32) for _ in range(10)]"
    )
    assert lint_written(tmp_path, {"main.py": source}, monkeypatch) == []


def test_an_absl_flag_declared_twice_is_not_resolved(tmp_path, monkeypatch):
    # which declaration holds is not known: the count of workers may be 0
    source = _INFINITE.format(extra="").replace(
        'flags.DEFINE_integer("total_steps"', 'flags.DEFINE_integer("num_workers", 0, help="again")\n    flags.DEFINE_integer("total_steps"'
    )
    assert "main.py:19 GPU104" not in lint_written(tmp_path, {"main.py": source}, monkeypatch)


# ---- a loader handed to a method of an object this module built ----------------------------------------------

_EVALUATORS = """
    import torch
    from torch.utils.data import DataLoader


    class MscEval(object):
        def __init__(self, n_classes, scales=(1.0,)):
            self.n_classes = n_classes
            self.scales = scales

        @torch.no_grad()
        def __call__(self, net, dl):
            hist = torch.zeros(self.n_classes, self.n_classes).cuda()
            for i, (imgs, label) in enumerate(dl):
                label = label.squeeze(1).cuda()
                logits = net(imgs.cuda())
                hist += torch.bincount(label.flatten() * self.n_classes + logits.argmax(1).flatten(), minlength=self.n_classes**2).view(self.n_classes, -1)
            return hist.diag() / hist.sum(1)


    def eval_model(net, dataset):
        net.cuda().eval()
        dl = DataLoader(dataset, batch_size=2, num_workers=4, pin_memory=True)
        {binding}
        return evaluator(net, dl)
"""


def test_a_pinned_loader_handed_to_an_evaluator_object_reports_its_blocking_copies(tmp_path, monkeypatch):
    source = _EVALUATORS.replace("{binding}", "evaluator = MscEval(19)")
    diagnostics = lint(write(tmp_path, {"evaluate.py": source}), monkeypatch)
    assert found(diagnostics) == ["evaluate.py:15 GPU105", "evaluate.py:16 GPU105"]
    label = diagnostics[0]
    # a view of the batch (`squeeze`) shares its pinned memory: the copy can overlap
    assert label.message == "`label.squeeze(1).cuda()` copies a batch of a pinned `DataLoader` (line 23) and blocks"
    assert [(e.location.row, e.content) for e in label.fix.edits] == [(15, "non_blocking=True")]


def test_a_name_bound_to_objects_of_two_classes_is_not_followed(tmp_path, monkeypatch):
    source = _EVALUATORS.replace("{binding}", "evaluator = MscEval(19) if dataset else Other()") + "\n\n    class Other:\n        pass\n"
    assert lint_written(tmp_path, {"evaluate.py": source}, monkeypatch) == []


def test_a_method_of_an_object_built_here_takes_the_loader(tmp_path, monkeypatch):
    source = _EVALUATORS.replace("def __call__(self, net, dl)", "def run(self, net, dl)").replace("{binding}", "evaluator = MscEval(19)")
    source = source.replace("return evaluator(net, dl)", "return evaluator.run(net, dl)")
    assert lint_written(tmp_path, {"evaluate.py": source}, monkeypatch) == ["evaluate.py:15 GPU105", "evaluate.py:16 GPU105"]


def test_a_converted_batch_is_not_the_pinned_memory(tmp_path, monkeypatch):
    # `.float()` builds a new pageable tensor: `non_blocking=True` would not make that copy overlap
    source = _EVALUATORS.replace("{binding}", "evaluator = MscEval(19)").replace("label.squeeze(1).cuda()", "label.float().cuda()")
    assert lint_written(tmp_path, {"evaluate.py": source}, monkeypatch) == ["evaluate.py:16 GPU105"]
