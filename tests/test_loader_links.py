"""Loaders built in one module and consumed in another (issue 14, sixth corpus): a factory whose result depends
on an argument, a loader handed to a training function of another module whose batches are moved in place."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, lint_written, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

_TRAIN_LOOP = """
    import torch
    from data import create_dataloader


    def train(model, optimizer, loader):
        for x, y in loader:
            x, y = x.to("cuda"), y.to("cuda")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    def main(model, optimizer):
        model.cuda()
        train_loader, val_loader = create_dataloader(is_train=True)
        for epoch in range(90):
            train(model, optimizer, train_loader)
"""

# `return train_loader, val_loader` when is_train, else one test loader: each caller's unpacking picks the result
_FACTORY_BY_ARGUMENT = """
    from torch.utils.data import DataLoader


    def create_dataloader(is_train, dataset=None):
        if is_train:
            train_loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
            val_loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
            return train_loader, val_loader
        test_loader = DataLoader(dataset, batch_size=64, num_workers=4)
        return test_loader
"""


def test_factory_whose_result_depends_on_an_argument_links_each_unpacked_loader(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"data.py": _FACTORY_BY_ARGUMENT, "train.py": _TRAIN_LOOP}), monkeypatch)
    assert found(diagnostics) == ["data.py:7 GPU104", "train.py:8 GPU105", "train.py:8 GPU105"]
    workers, pinned = diagnostics[0], diagnostics[1]
    assert workers.message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at train.py:18 "
        "(its batches are taken at train.py:7)"
    )
    # the unpacking takes the tuple branch: the pinned training loader (data.py:7), not the test loader
    assert pinned.message == '`x.to("cuda")` copies a batch of a pinned `DataLoader` (data.py:7) and blocks'


def test_the_other_branch_of_the_factory_is_linked_only_where_a_caller_takes_it(tmp_path, monkeypatch):
    # evaluate.py takes the single test loader: its batches reach the GPU without pinned memory (GPU102)
    evaluate = """
        import torch
        from data import create_dataloader


        def evaluate(model):
            model.cuda().eval()
            test_loader = create_dataloader(is_train=False)
            with torch.no_grad():
                for x, y in test_loader:
                    print(model(x.to("cuda")).argmax(1).eq(y.to("cuda")).sum().item())
    """
    # (the per-batch read in evaluate.py is followed only by the next batch's blocking copies from a loader with
    # workers: the step waits there anyway, no GPU303; see step_syncs)
    assert lint_written(tmp_path, {"data.py": _FACTORY_BY_ARGUMENT, "train.py": _TRAIN_LOOP, "evaluate.py": evaluate}, monkeypatch) == [
        "data.py:10 GPU102", "data.py:7 GPU104", "train.py:8 GPU105", "train.py:8 GPU105",
    ]  # fmt: skip


def test_a_test_branch_taken_only_by_a_cpu_loop_stays_silent(tmp_path, monkeypatch):
    # the single (unpinned) test loader feeds a CPU evaluation: no GPU102; the unpacking caller is unchanged
    evaluate = """
        from data import create_dataloader


        def evaluate(model):
            test_loader = create_dataloader(is_train=False)
            for x, y in test_loader:
                print(model(x).argmax(1).eq(y).sum())
    """
    assert lint_written(tmp_path, {"data.py": _FACTORY_BY_ARGUMENT, "train.py": _TRAIN_LOOP, "evaluate.py": evaluate}, monkeypatch) == [
        "data.py:7 GPU104", "train.py:8 GPU105", "train.py:8 GPU105",
    ]  # fmt: skip


def test_a_factory_that_returns_a_loader_or_something_else_stays_unknown(tmp_path, monkeypatch):
    # one branch returns no loader at all (two values of unknown kind): not every return holds loaders, so nothing is linked
    data = _FACTORY_BY_ARGUMENT.replace("return train_loader, val_loader", "return object(), object()")
    assert lint_written(tmp_path, {"data.py": data, "train.py": _TRAIN_LOOP}, monkeypatch) == []


def test_a_count_returned_beside_the_loaders_keeps_them_linked(tmp_path, monkeypatch):
    # RepDistiller's `return train_loader, test_loader, n_data` (or the pair): the unpacking of three takes the
    # loaders at 0 and 1; the count at 2 is of no known kind and says nothing
    data = """
        from torch.utils.data import DataLoader


        def get_dataloaders(dataset, num_workers=8, is_instance=False):
            train_loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=num_workers)
            test_loader = DataLoader(dataset, batch_size=32, shuffle=False, num_workers=int(num_workers / 2))
            if is_instance:
                return train_loader, test_loader, len(dataset)
            return train_loader, test_loader
    """
    train = """
        import torch
        from data import get_dataloaders


        def validate(loader, model):
            with torch.no_grad():
                for x, y in loader:
                    print(model(x.cuda()).argmax(1).eq(y.cuda()).sum().item())


        def main(model, optimizer, dataset):
            model.cuda()
            train_loader, val_loader, n_data = get_dataloaders(dataset, is_instance=True)
            for epoch in range(240):
                for x, y in train_loader:
                    loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                validate(val_loader, model)
    """
    diagnostics = lint(write(tmp_path, {"data.py": data, "train.py": train}), monkeypatch)
    assert found(diagnostics) == ["data.py:6 GPU102", "data.py:6 GPU104", "data.py:7 GPU102", "data.py:7 GPU104"]
    test_workers = diagnostics[3]
    assert test_workers.message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at train.py:15 "
        "(its batches are taken at train.py:8)"
    )
    # half of the workers is 0 when the caller asks for one: the fix keeps that run working
    assert [e.content for e in test_workers.fix.edits] == [", persistent_workers=int(num_workers / 2) > 0"]


# ---- a loader handed to a training function of another module ----------------------------------------------

_FINETUNING = """
    import torch
    from torch.utils.data import DataLoader
    from train_utils import train


    def main(model, dataset, dl_kwargs):
        train_dataloader = DataLoader(dataset, num_workers=2, pin_memory=True, persistent_workers=True, **dl_kwargs)
        model.to("cuda")
        train(model, train_dataloader, torch.optim.AdamW(model.parameters()))
"""

# the batch is a dict whose fields are replaced, in place, by their copies on the GPU
_TRAIN_UTILS = """
    def train(model, train_dataloader, optimizer):
        for epoch in range(3):
            for step, batch in enumerate(train_dataloader):
                for key in batch.keys():
                    batch[key] = batch[key].to("cuda:0")
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
"""


def test_a_pinned_loader_handed_to_another_modules_loop_reports_its_blocking_copies(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"finetuning.py": _FINETUNING, "train_utils.py": _TRAIN_UTILS}), monkeypatch)
    assert found(diagnostics) == ["train_utils.py:6 GPU105"]
    copy = diagnostics[0]
    # `pin_memory=True` is written out: `**dl_kwargs` cannot set it again, so the loader is pinned
    assert copy.message == '`batch[key].to("cuda:0")` copies a batch of a pinned `DataLoader` (finetuning.py:8) and blocks'
    # the safe fix adds `non_blocking=True` to that copy: `batch[key].to("cuda:0", non_blocking=True)`
    assert [(e.location.row, e.location.column, e.content) for e in copy.fix.edits] == [(6, 52, ", non_blocking=True")]


def test_a_unit_test_that_hands_the_function_a_mock_changes_nothing(tmp_path, monkeypatch):
    test = """
        import pytest
        from unittest.mock import MagicMock
        from train_utils import train


        def test_train():
            train(MagicMock(), [{"x": MagicMock()}], MagicMock())
    """
    files = {"finetuning.py": _FINETUNING, "train_utils.py": _TRAIN_UTILS, "tests/test_train.py": test}
    assert lint_written(tmp_path, files, monkeypatch) == ["train_utils.py:6 GPU105"]


def test_a_function_also_given_something_else_than_a_loader_stays_silent(tmp_path, monkeypatch):
    # another script hands it a list of batches: which one the parameter holds is not known
    other = """
        from train_utils import train


        def replay(model, optimizer, batches):
            train(model.cuda(), list(batches), optimizer)
    """
    files = {"finetuning.py": _FINETUNING, "train_utils.py": _TRAIN_UTILS, "replay.py": other}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_a_function_handed_a_pinned_loader_by_one_script_and_an_unpinned_one_by_another_stays_silent(tmp_path, monkeypatch):
    other = _FINETUNING.replace("pin_memory=True", "pin_memory=False")
    files = {"finetuning.py": _FINETUNING, "finetuning_unpinned.py": other, "train_utils.py": _TRAIN_UTILS}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_an_unpinned_loader_handed_over_stays_silent(tmp_path, monkeypatch):
    finetuning = _FINETUNING.replace("pin_memory=True", "pin_memory=False")
    assert lint_written(tmp_path, {"finetuning.py": finetuning, "train_utils.py": _TRAIN_UTILS}, monkeypatch) == []


# ---- a loader bound at module level, iterated as a global ----------------------------------------------------

_UTILS = """
    from torch.utils.data import DataLoader


    def get_test_dataloader(dataset, batch_size=16, num_workers=2):
        test_loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
        return test_loader
"""

_SCRIPT = """
    import torch
    from utils import get_test_dataloader


    @torch.no_grad()
    def eval_training(epoch=0):
        net.eval()
        correct = 0
        for images, labels in test_loader:
            correct += net(images.cuda()).argmax(1).eq(labels.cuda()).sum()
        return correct


    if __name__ == "__main__":
        net = torch.nn.Linear(4, 2).cuda()
        test_loader = get_test_dataloader(None)
        for epoch in range(1, 200):
            acc = eval_training(epoch)
"""


def test_a_module_level_loader_iterated_as_a_global_in_a_per_epoch_function(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"utils.py": _UTILS, "train.py": _SCRIPT}), monkeypatch)
    assert [d for d in found(diagnostics) if d.startswith("utils.py")] == ["utils.py:6 GPU102", "utils.py:6 GPU104"]
    workers = next(d for d in diagnostics if d.code == "GPU104")
    assert workers.message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at train.py:18 "
        "(its batches are taken at train.py:10)"
    )


def test_a_global_loader_iterated_once_outside_any_loop_keeps_its_workers(tmp_path, monkeypatch):
    script = _SCRIPT.replace("        for epoch in range(1, 200):\n            acc = eval_training(epoch)", "        acc = eval_training()")
    assert "for epoch" not in script
    assert [d for d in lint_written(tmp_path, {"utils.py": _UTILS, "train.py": script}, monkeypatch) if "GPU104" in d] == []


# ---- a loader handed on through a parameter to a third module ------------------------------------------------
# UNet3D (twelfth corpus): `main.py` builds the loaders and runs `train(...)` of `training.py`, whose epoch loop runs
# `evaluate(model, val_loader, device)` of `inference.py`; `main.py` also runs `evaluate` itself in its evaluate mode.

_MAIN = """
    import torch
    from torch.utils.data import DataLoader
    from training import train
    from inference import evaluate


    def main(model, train_set, val_set, mode):
        device = torch.device("cuda")
        train_loader = DataLoader(train_set, batch_size=2, shuffle=True, num_workers=8, pin_memory=True, persistent_workers=True)
        val_loader = DataLoader(val_set, batch_size=1, num_workers=8, pin_memory=True, persistent_workers=True)
        if mode == "train":
            train(model, train_loader, val_loader, device)
        else:
            evaluate(model, val_loader, device)
"""

_TRAINING = """
    import torch
    from inference import evaluate


    def train(model, train_loader, val_loader, device):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(1, 4000):
            for image, label in train_loader:
                loss = model(image.to(device, non_blocking=True)).sub(label.to(device, non_blocking=True)).abs().mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            if epoch % 20 == 0:
                print(evaluate(model, val_loader, device))
"""

_INFERENCE = """
    import torch


    def evaluate(model, loader, device):
        model.to(device)
        model.eval()
        scores = []
        with torch.no_grad():
            for image, label in loader:
                image, label = image.to(device), label.to(device)
                scores.append(model(image).sub(label).abs().mean())
        return torch.stack(scores).mean().item()
"""


def test_a_pinned_loader_handed_on_through_a_training_function_reaches_the_evaluation_copies(tmp_path, monkeypatch):
    files = {"main.py": _MAIN, "training.py": _TRAINING, "inference.py": _INFERENCE}
    diagnostics = lint(write(tmp_path, files), monkeypatch)
    assert found(diagnostics) == ["inference.py:11 GPU105", "inference.py:11 GPU105"]
    copy = diagnostics[0]
    assert copy.message == "`image.to(device)` copies a batch of a pinned `DataLoader` (main.py:11) and blocks"
    assert [(e.location.row, e.location.column, e.content) for e in copy.fix.edits] == [(11, 43, ", non_blocking=True")]


def test_a_loader_handed_on_by_a_function_another_script_gives_an_unpinned_loader_stays_silent(tmp_path, monkeypatch):
    # a second script runs `train` with an unpinned validation loader: which one `evaluate` copies is not known
    # (that script's own loader is reported unpinned)
    other = _MAIN.replace("batch_size=1, num_workers=8, pin_memory=True", "batch_size=1, num_workers=8, pin_memory=False")
    files = {"main.py": _MAIN, "main_unpinned.py": other, "training.py": _TRAINING, "inference.py": _INFERENCE}
    assert lint_written(tmp_path, files, monkeypatch) == ["main_unpinned.py:11 GPU102"]


def test_a_parameter_filled_by_a_call_of_its_own_module_is_not_followed(tmp_path, monkeypatch):
    # `train` is also run by its own module with a list of tensors: what it hands `evaluate` is not known
    training = _TRAINING + """

    def smoke_test(model):
        train(model, [(torch.zeros(2, 4), torch.zeros(2, 4))], [(torch.zeros(1, 4), torch.zeros(1, 4))], "cuda")
"""
    files = {"main.py": _MAIN, "training.py": training, "inference.py": _INFERENCE}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_a_parameter_handed_on_changed_is_not_the_loader(tmp_path, monkeypatch):
    # `train` hands `evaluate` a list it builds from the loader's batches, not the loader itself
    training = _TRAINING.replace("evaluate(model, val_loader, device)", "evaluate(model, list(val_loader), device)")
    files = {"main.py": _MAIN, "training.py": training, "inference.py": _INFERENCE}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_a_loader_a_factory_of_a_third_module_builds_is_named_where_it_is_built(tmp_path, monkeypatch):
    # UNet3D's layout: `data_loader.py` builds both loaders, `main.py` unpacks them and hands them on
    data = """
        from torch.utils.data import DataLoader


        def get_data_loaders(train_set, val_set):
            train_loader = DataLoader(train_set, batch_size=2, shuffle=True, num_workers=8, pin_memory=True, persistent_workers=True)
            val_loader = DataLoader(val_set, batch_size=1, num_workers=8, pin_memory=True, persistent_workers=True)
            return train_loader, val_loader
    """
    main = """
        import torch
        from data_loader import get_data_loaders
        from training import train


        def main(model, train_set, val_set):
            train_loader, val_loader = get_data_loaders(train_set, val_set)
            train(model, train_loader, val_loader, torch.device("cuda"))
    """
    files = {"data_loader.py": data, "main.py": main, "training.py": _TRAINING, "inference.py": _INFERENCE}
    diagnostics = lint(write(tmp_path, files), monkeypatch)
    assert found(diagnostics) == ["inference.py:11 GPU105", "inference.py:11 GPU105"]
    # the line is of data_loader.py, where the validation loader is built (not of main.py, which hands it on)
    assert diagnostics[0].message == "`image.to(device)` copies a batch of a pinned `DataLoader` (data_loader.py:7) and blocks"


# ---- a loader handed to the constructor of another module's class ---------------------------------------------

_RUN = """
    import torch
    from torch.utils.data import DataLoader
    from trainer import Trainer


    def main(model, train_set):
        train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=8, pin_memory=True, persistent_workers=True)
        trainer = Trainer(model.cuda(), train_loader, torch.device("cuda"))
        trainer.fit(100)
"""

_TRAINER = """
    import torch


    class Trainer:
        def __init__(self, model, train_loader, device):
            self.model = model
            self.train_loader = train_loader
            self.device = device
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def fit(self, epochs):
            for epoch in range(epochs):
                for image, label in self.train_loader:
                    image, label = image.to(self.device), label.to(self.device)
                    loss = torch.nn.functional.cross_entropy(self.model(image), label)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
"""


def test_a_pinned_loader_handed_to_a_trainer_class_of_another_module_reaches_its_methods_copies(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"main.py": _RUN, "trainer.py": _TRAINER}), monkeypatch)
    assert found(diagnostics) == ["trainer.py:15 GPU105", "trainer.py:15 GPU105"]
    copy = diagnostics[0]
    assert copy.message == "`image.to(self.device)` copies a batch of a pinned `DataLoader` (main.py:8) and blocks"
    assert [(e.location.row, e.location.column, e.content) for e in copy.fix.edits] == [(15, 52, ", non_blocking=True")]


def test_a_trainer_class_another_script_builds_with_an_unpinned_loader_stays_silent(tmp_path, monkeypatch):
    other = _RUN.replace("pin_memory=True", "pin_memory=False")
    files = {"main.py": _RUN, "main_unpinned.py": other, "trainer.py": _TRAINER}
    assert [d for d in lint_written(tmp_path, files, monkeypatch) if "GPU105" in d] == []


def test_a_trainer_class_with_subclasses_stays_silent(tmp_path, monkeypatch):
    # `GANTrainer(Trainer)` is built elsewhere through its own constructor: what reaches `Trainer.__init__` is not all in sight
    gan = """
        from trainer import Trainer


        class GANTrainer(Trainer):
            def __init__(self, model, batches):
                super().__init__(model, batches, "cuda")
    """
    files = {"main.py": _RUN, "trainer.py": _TRAINER, "gan.py": gan}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_a_trainer_class_also_built_in_its_own_module_is_not_followed(tmp_path, monkeypatch):
    trainer = _TRAINER + """

    def smoke_test(model):
        Trainer(model, [(torch.zeros(2, 4), torch.zeros(2))], "cuda").fit(1)
"""
    files = {"main.py": _RUN, "trainer.py": trainer}
    assert lint_written(tmp_path, files, monkeypatch) == []
