"""Loaders followed through lists, iterators, generators of other modules and helpers several scripts call
(issue 14, seventh corpus: vits, nanoVLM, HRNet, DeepLabV3Plus shapes), and the expert shapes that stay silent."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, lint_written, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

# ---- loaders handed to a helper in a list (vits' `train_and_evaluate`) ---------------------------------------

_LIST_OF_LOADERS = """
    import torch
    from torch.utils.data import DataLoader


    def main(dataset, model, optimizer, epochs):
        train_loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True{persistent})
        eval_loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True{persistent})
        for epoch in range(epochs):
            train_and_evaluate(epoch, model, optimizer, [train_loader, eval_loader])


    def train_and_evaluate(epoch, model, optimizer, loaders):
        train_loader, eval_loader = loaders
        model.train()
        for x, y in train_loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for x, y in eval_loader:
                x = x.cuda(0)
                model(x)
                break
"""


def test_loaders_handed_over_in_a_list_are_followed_into_the_helper(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": _LIST_OF_LOADERS.format(persistent="")}), monkeypatch)
    # both loaders restart their workers every epoch; the evaluation pass takes one batch and breaks: its
    # blocking copy runs once per epoch, with nothing to overlap (no GPU105)
    assert found(diagnostics) == ["train.py:7 GPU104", "train.py:8 GPU104"]
    assert diagnostics[0].message == "`DataLoader` workers are shut down and started again for every pass of the loop at line 9"


def test_a_list_of_persistent_pinned_loaders_copied_without_blocking_stays_silent(tmp_path, monkeypatch):
    # the expert shape: workers kept, memory pinned, copies asynchronous
    source = _LIST_OF_LOADERS.format(persistent=", persistent_workers=True")
    assert lint_written(tmp_path, {"train.py": source}, monkeypatch) == []


# ---- an iterator made again each epoch, through a generator of another module (nanoVLM) ----------------------

_STEP_GENERATOR = """
    def synchronized_dataloader_step(train_loader, is_dist):
        for batch in train_loader:
            if batch is not None:
                yield batch
"""

_ITERATOR_TRAIN = """
    import torch
    from torch.utils.data import DataLoader
    from data_utils import synchronized_dataloader_step


    def get_dataloaders(dataset):
        train_loader = DataLoader(dataset, batch_size=32, num_workers=3, pin_memory=True, persistent_workers={persistent})
        iter_train_loader = iter(train_loader)
        return train_loader, iter_train_loader


    def train(model, optimizer, dataset, max_steps):
        device = torch.device("cuda")
        train_loader, iter_train_loader = get_dataloaders(dataset)
        step = 0
        while step < max_steps:
            for batch in synchronized_dataloader_step(iter_train_loader, False):
                input_ids = batch["input_ids"].to(device{non_blocking})
                loss = model(input_ids)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
            iter_train_loader = iter(train_loader)
"""


def test_batches_of_a_new_iterator_through_a_generator_of_another_module(tmp_path, monkeypatch):
    source = _ITERATOR_TRAIN.format(persistent="False", non_blocking="")
    diagnostics = lint(write(tmp_path, {"data_utils.py": _STEP_GENERATOR, "train.py": source}), monkeypatch)
    assert found(diagnostics) == ["train.py:8 GPU104", "train.py:19 GPU105"]
    workers, copy = diagnostics
    # `iter(train_loader)` again at the end of each pass starts the same loader's workers again
    assert workers.message == "`DataLoader` workers are shut down and started again for every pass of the loop at line 17"
    assert copy.message == '`batch["input_ids"].to(device)` copies a batch of a pinned `DataLoader` (line 8) and blocks'
    assert [e.content for e in copy.fix.edits] == [", non_blocking=True"]


def test_a_new_iterator_over_persistent_workers_copied_without_blocking_stays_silent(tmp_path, monkeypatch):
    source = _ITERATOR_TRAIN.format(persistent="True", non_blocking=", non_blocking=True")
    assert lint_written(tmp_path, {"data_utils.py": _STEP_GENERATOR, "train.py": source}, monkeypatch) == []


def test_a_validation_loop_inside_the_training_loop_copies_its_own_loaders_batches(tmp_path, monkeypatch):
    # `for batch in val_loader:` inside the loop over the training batches rebinds `batch`: the copies there are
    # the validation loader's, reported with its line
    source = """
        import torch
        from torch.utils.data import DataLoader


        def train(model, optimizer, dataset, epochs):
            device = torch.device("cuda")
            train_loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)
            val_loader = DataLoader(dataset, batch_size=32, num_workers=1, pin_memory=True, persistent_workers=True)
            for epoch in range(epochs):
                for step, batch in enumerate(train_loader):
                    loss = model(batch["input_ids"].to(device, non_blocking=True))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    if step % 500 == 0:
                        with torch.no_grad():
                            for batch in val_loader:
                                print(model(batch["input_ids"].to(device)))
    """
    diagnostics = lint(write(tmp_path, {"train.py": source}), monkeypatch)
    assert found(diagnostics) == ["train.py:19 GPU105"]
    assert diagnostics[0].message == '`batch["input_ids"].to(device)` copies a batch of a pinned `DataLoader` (line 9) and blocks'


# ---- a helper several scripts call: run again only where the call sits in a loop (HRNet) ---------------------

_FUNCTION = """
    import torch


    def validate(loader, model):
        with torch.no_grad():
            for x, y in loader:
                print(model(x.cuda(non_blocking=True)).argmax(1).eq(y.cuda(non_blocking=True)).sum())
"""

_LOADER = "torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=False, num_workers=cfg.WORKERS, pin_memory=True)"

_TRAIN_SCRIPT = f"""
    import torch
    import _init_paths
    from config import cfg
    from core.function import validate


    def main(model, dataset):
        valid_loader = {_LOADER}
        for epoch in range(cfg.TRAIN.END_EPOCH):
            validate(valid_loader, model.cuda())
"""

_TEST_SCRIPT = f"""
    import torch
    import _init_paths
    from config import cfg
    from core.function import validate


    def main(model, dataset):
        valid_loader = {_LOADER}
        validate(valid_loader, model.cuda())
"""

_DEFAULTS = """
    from yacs.config import CfgNode as CN

    _C = CN()
    _C.WORKERS = 4
    _C.TRAIN = CN()
    _C.TRAIN.END_EPOCH = 210
"""


def _hrnet(workers_in_yaml: int) -> dict[str, str]:
    return {
        "tools/_init_paths.py": "import sys\nsys.path.insert(0, 'lib')\n",
        "tools/train.py": _TRAIN_SCRIPT,
        "tools/test.py": _TEST_SCRIPT,
        "lib/config/__init__.py": "from .default import _C as cfg\n",
        "lib/config/default.py": _DEFAULTS,
        "lib/core/__init__.py": "",
        "lib/core/function.py": _FUNCTION,
        "experiments/coco/w32.yaml": f"WORKERS: {workers_in_yaml}\nTRAIN:\n  END_EPOCH: 210\n",
    }


def test_a_yacs_worker_count_and_a_helper_under_lib_run_again_by_the_training_epochs(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, _hrnet(24)), monkeypatch)
    # the training script's epoch loop runs the helper again; the test script hands its loader over once
    # (and `validate` prints a GPU count every batch: its `model` is what every caller moved, so the loop runs a GPU model)
    assert sorted(found(diagnostics)) == ["lib/core/function.py:8 GPU303", "tools/train.py:9 GPU104"]
    diagnostics = [d for d in diagnostics if d.code == "GPU104"]
    assert diagnostics[0].message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at tools/train.py:10 "
        "(its batches are taken at lib/core/function.py:7)"
    )


def test_a_yaml_file_that_sets_no_workers_keeps_the_count_unknown(tmp_path, monkeypatch):
    # one shipped experiment runs without workers: the count is not above 0 in every setting, so nothing is said
    assert lint_written(tmp_path, _hrnet(0), monkeypatch) == ["lib/core/function.py:8 GPU303"]


# ---- a query on the dataset in the epoch loop (DeepLabV3Plus' `decode_target`) ------------------------------

_WHILE_TRUE = """
    import torch
    from torch.utils.data import DataLoader


    def main(model, optimizer, train_dst, total_itrs):
        train_loader = DataLoader(train_dst, batch_size=16, shuffle=True, num_workers=2, pin_memory=True)
        cur_itrs = 0
        while True:
            {epoch_call}
            for images, labels in train_loader:
                cur_itrs += 1
                images = images.cuda(non_blocking=True)
                loss = model(images).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if cur_itrs % 1000 == 0:
                    target = train_dst.decode_target(labels[0].numpy())
                if cur_itrs >= total_itrs:
                    return
"""


def test_a_query_on_the_dataset_leaves_the_endless_epoch_loop_reported(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"main.py": _WHILE_TRUE.format(epoch_call="pass")}), monkeypatch)
    assert found(diagnostics) == ["main.py:7 GPU104"]
    assert diagnostics[0].message == "`DataLoader` workers are shut down and started again for every pass of the loop at line 9"


def test_a_dataset_method_called_for_its_effect_in_the_epoch_loop_stays_silent(tmp_path, monkeypatch):
    # persistent workers would keep their stale copy of the dataset that `set_epoch` changes
    source = _WHILE_TRUE.format(epoch_call="train_dst.set_epoch(cur_itrs)")
    assert lint_written(tmp_path, {"main.py": source}, monkeypatch) == []


# ---- half of a known worker count ---------------------------------------------------------------------------

_HALVED = """
    import torch
    from torch.utils.data import DataLoader

    WORKERS = {workers}


    def main(model, dataset, epochs):
        test_loader = DataLoader(dataset, batch_size=32, num_workers=WORKERS // 2, pin_memory=True)
        for epoch in range(epochs):
            with torch.no_grad():
                for x, y in test_loader:
                    model(x.cuda(non_blocking=True))
"""


def test_half_of_a_known_worker_count_is_that_many_workers(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": _HALVED.format(workers=8)}), monkeypatch)
    assert found(diagnostics) == ["train.py:9 GPU104"]
    assert [e.content for e in diagnostics[0].fix.edits] == [", persistent_workers=WORKERS // 2 > 0"]


def test_half_of_one_worker_is_none(tmp_path, monkeypatch):
    # `1 // 2` is 0: no workers to keep
    assert lint_written(tmp_path, {"train.py": _HALVED.format(workers=1)}, monkeypatch) == []
