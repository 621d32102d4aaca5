"""GPU104 dataloader-workers-not-persistent."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.diagnostics import Applicability, Severity
from tests.conftest import diagnostics, findings, fixed

ONLY = {"select": ("GPU104",)}
# These tests are about which loaders and loops GPU104 recognizes, over datasets whose pass the code does not show:
# reported with `unproven-cost` (by default a pass or an interval shown short; tests/test_epoch_length.py).
pytestmark = pytest.mark.usefixtures("unproven_cost")


def test_loader_with_workers_iterated_in_an_epoch_loop():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)
        for epoch in range(10):
            for x in loader:
                model(x.cuda()).sum().backward()
    """
    assert findings(source, **ONLY) == ["4:10 GPU104"]
    [d] = diagnostics(source, **ONLY)
    assert d.severity == Severity.WARNING and d.fix.applicability == Applicability.UNSAFE
    assert "loop at line 5" in d.message
    assert fixed(source, unsafe=False, **ONLY) == textwrap.dedent(source)
    assert fixed(source, **ONLY) == textwrap.dedent(source).replace(
        "num_workers=4)", "num_workers=4, persistent_workers=True)"
    )


def test_a_worker_option_whose_default_is_only_bounded_counts_and_keeps_workers_0_working():
    """Seen on an H100 (bench/results/gpu_verify.md): GPU101's own fix sets `--workers` to
    `min(8, max(1, ...))`; the loader, re-iterated every epoch, then restarted its workers each epoch (a timm
    script with 8 batches an epoch stalled at every boundary) and GPU104 stayed silent."""
    source = """\
        import argparse
        import os

        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default=min(8, max(1, (os.cpu_count() or 2) - 1)))
        args = parser.parse_args()
        loader = DataLoader(ds, batch_size=64, num_workers=args.workers)
        for epoch in range(100):
            for x in loader:
                model(x.cuda()).sum().backward()
    """
    assert findings(source, **ONLY) == ["9:10 GPU104"]
    assert "num_workers=args.workers, persistent_workers=args.workers > 0)" in fixed(source, **ONLY)
    # no proven lower bound above 0: nothing to say
    assert findings(source.replace("max(1, (os.cpu_count() or 2) - 1)", "(os.cpu_count() or 2) - 1"), **ONLY) == []


def test_epoch_loop_around_the_call_that_passes_the_loader():
    source = """\
        import argparse
        import torch
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default=4)
        args = parser.parse_args()

        def validate(model, loader):
            with torch.no_grad():
                for x in loader:
                    model(x.cuda())

        def main():
            val_loader = DataLoader(ds, batch_size=64, num_workers=args.workers)
            for epoch in range(10):
                validate(model, val_loader)
    """
    assert findings(source, **ONLY) == ["15:18 GPU104"]
    [d] = diagnostics(source, **ONLY)
    assert d.severity == Severity.INFO  # an evaluation loader
    # `--workers 0` must keep working: the value follows the option.
    assert "num_workers=args.workers, persistent_workers=args.workers > 0)" in fixed(source, **ONLY)
    # Without a resolvable worker count there is nothing to say.
    assert findings(source.replace("default=4", "default=None"), **ONLY) == []


def test_explicit_false_literal_is_replaced():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, persistent_workers=False)
        while True:
            for x in loader:
                model(x.cuda()).sum().backward()
    """
    assert findings(source, **ONLY) == ["4:10 GPU104"]
    assert "persistent_workers=True)" in fixed(source, **ONLY)


def test_fix_is_idempotent():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4)
        for epoch in range(3):
            for x in loader:
                x.cuda()
    """
    once = fixed(source, **ONLY)
    assert fixed(once, **ONLY) == once and findings(once, **ONLY) == []


# ---- no finding expected ---------------------------------------------------------------------------


def test_no_workers_or_unknown_workers():
    for workers in ("", ", num_workers=0", ", num_workers=cfg.workers", ", **kwargs"):
        assert findings(f"""\
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(ds, batch_size=64{workers})
            for epoch in range(3):
                for x in loader:
                    x.cuda()
        """, **ONLY) == [], workers


def test_iterated_once():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4)
        for x in loader:
            x.cuda()
    """, **ONLY) == []


def test_new_loader_every_epoch():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        for epoch in range(3):
            loader = DataLoader(make_dataset(epoch), batch_size=64, num_workers=4)
            for x in loader:
                x.cuda()
    """, **ONLY) == []


def test_dataset_changes_between_epochs():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(train_ds, batch_size=64, num_workers=4)
        for epoch in range(3):
            train_ds.set_epoch(epoch)
            for x in loader:
                x.cuda()
    """, **ONLY) == []
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(train_ds, batch_size=64, num_workers=4)
        for epoch in range(3):
            loader.dataset.transform = schedule[epoch]
            for x in loader:
                x.cuda()
    """, **ONLY) == []


def test_already_persistent():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, persistent_workers=True)
        for epoch in range(3):
            for x in loader:
                x.cuda()
    """, **ONLY) == []


def test_module_level_loader_read_as_a_global_in_per_epoch_functions():
    # kuangliu/pytorch-cifar main.py: `def train(epoch): for ... in trainloader` called from the epoch loop.
    source = """\
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        trainloader = torch.utils.data.DataLoader(trainset, batch_size=128, shuffle=True, num_workers=2)

        def train(epoch):
            for inputs, targets in trainloader:
                inputs, targets = inputs.to(device), targets.to(device)
                net(inputs).sum().backward()

        for epoch in range(200):
            train(epoch)
    """
    assert findings(source, select=("GPU102", "GPU104")) == ["4:15 GPU102", "4:15 GPU104"]
    [d] = diagnostics(source, select=("GPU104",))
    assert d.severity == Severity.WARNING


def test_sampler_set_epoch_does_not_change_the_dataset():
    # DistributedSampler.set_epoch runs in the main process: persistent workers still see the new order.
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(train_ds, batch_size=64, sampler=sampler, num_workers=4)
        for epoch in range(3):
            sampler.set_epoch(epoch)
            for x in loader:
                x.cuda()
    """
    assert findings(source, **ONLY) == ["4:10 GPU104"]


# ---- the epoch count: one or two epochs start the workers once or twice ------------------------------

EPOCHS = """\
    import argparse
    import torch
    from torch.utils.data import DataLoader

    device = torch.device("cuda")
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default={default})
    args = parser.parse_args()


    def train_model(model, dataloader, epochs=1, optimizer=None):
        for epoch in range(epochs):
            for inputs, classes in dataloader:
                loss = model(inputs.to(device)).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


    loader = DataLoader(images, batch_size=64, shuffle=True, num_workers=6)
    train_model(model, loader, epochs={passed}, optimizer=opt)
    features = DataLoader(feats, batch_size=64, shuffle=True, num_workers=6)
    train_model(model, features, optimizer=opt)
    scripted = DataLoader(images, batch_size=64, shuffle=True, num_workers=4)
    for epoch in range(1, args.epochs + 1):
        for x, y in scripted:
            model(x.to(device)).sum().backward()
            opt.step()
    num_epochs = {constant}
    last = DataLoader(images, batch_size=64, shuffle=True, num_workers=4)
    for epoch in range(num_epochs):
        for x, y in last:
            model(x.to(device)).sum().backward()
            opt.step()
"""


def test_one_or_two_epochs_are_silent():
    # The argument the call that hands the loader in passes (2), the parameter's default where it passes
    # none (1), the argparse default (1 epoch: `range(1, 1 + 1)`), a constant (2).
    assert findings(EPOCHS.format(default=1, passed=2, constant=2), **ONLY) == []


def test_many_epochs_or_an_unknown_count_stay_reported():
    source = EPOCHS.format(default=90, passed=50, constant="len(schedule)")
    assert findings(source, **ONLY) == ["20:10 GPU104", "24:12 GPU104", "30:8 GPU104"]
    [first, *_] = diagnostics(source, **ONLY)
    assert first.message == "`DataLoader` workers are shut down and started again for every pass of the loop at line 12"


def test_the_same_function_run_for_two_and_for_fifty_epochs():
    # dataflowr's `train_model(..., epochs=2)` on images and `epochs=50` on features: each loader its own count.
    source = EPOCHS.format(default=1, passed=2, constant=2).replace("train_model(model, features, optimizer=opt)", "train_model(model, features, epochs=50, optimizer=opt)")
    assert findings(source, **ONLY) == ["22:12 GPU104"]


def test_the_epoch_threshold_is_an_option():
    source = EPOCHS.format(default=1, passed=2, constant=2)
    assert findings(source, select=("GPU104",), rule_options=(("GPU104", (("min-epochs", 2),)),)) == ["20:10 GPU104", "30:8 GPU104"]


def test_a_progress_bar_over_the_epochs():
    source = EPOCHS.format(default=1, passed=2, constant=2).replace("import argparse", "import argparse\n    from tqdm import tqdm, trange")
    for loop, many in (("tqdm(range(num_epochs))", "tqdm(range(num_epochs + 8))"), ("trange(num_epochs)", "trange(num_epochs * 5)")):
        assert findings(source.replace("range(num_epochs)", loop), **ONLY) == []
        # `num_epochs * 5` is not read (only `+` and `-` are): unknown, reported like `+ 8` (10 epochs)
        assert findings(source.replace("range(num_epochs)", many), **ONLY) == ["31:8 GPU104"]


def test_a_loader_a_function_builds_anew_at_each_call_keeps_nothing_alive(tmp_path, monkeypatch):
    # The evaluation helper builds its loaders at every call (once per epoch): each one is iterated once,
    # so persistent workers would outlive nothing. A loader built once and iterated every epoch is reported.
    from tests.projects_helper import lint_written

    files = {
        "data.py": """\
            from torch.utils.data import DataLoader

            def get_eval_loader(root, num_workers=4):
                return DataLoader(ImageFolder(root), batch_size=32, num_workers=num_workers)

            def get_train_loader(root):
                return DataLoader(ImageFolder(root), batch_size=32, num_workers=4, pin_memory=True)
            """,
        "fid.py": """\
            from data import get_eval_loader

            def fid(model, paths):
                loaders = [get_eval_loader(p) for p in paths]
                for loader in loaders:
                    for x in loader:
                        model(x.cuda(non_blocking=True))

            def lpips(model, path):
                loader = get_eval_loader(path)
                for x in loader:
                    model(x.cuda(non_blocking=True))
            """,
        "train.py": """\
            from data import get_train_loader
            from fid import fid, lpips

            loader = get_train_loader("train")
            for epoch in range(10):
                for x in loader:
                    model(x.cuda(non_blocking=True)).sum().backward()
                    opt.step()
                fid(model, ["a", "b"])
                lpips(model, "a")
            """,
    }
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU104" in f] == ["data.py:7 GPU104"]


def test_one_worker_over_an_in_memory_tensor_is_silent():
    # Rows of a tensor already in memory: the worker has no work, so keeping it alive saves nothing.
    source = """\
        import numpy as np
        import torch
        from torch.utils.data import DataLoader

        data = torch.from_numpy(np.load("poems.npz")["data"])
        loader = DataLoader(data, batch_size=128, shuffle=True, num_workers=1)
        for epoch in range(20):
            for batch in loader:
                model(batch.long().cuda()).sum().backward()
        """
    assert findings(source, select=("GPU104",)) == []
    decoded = source.replace('torch.from_numpy(np.load("poems.npz")["data"])', 'ImageFolder("train", transform=augment)')
    assert findings(decoded, select=("GPU104",)) == ["6:10 GPU104"]



LIGHTNING_LOADERS = """\
    import lightning as L
    from torch.utils.data import DataLoader


    class LitModel(L.LightningModule):
        def training_step(self, batch, batch_idx):
            return self.net(batch[0]).sum()

        def {hook}(self):
            return DataLoader(ds, batch_size=32, num_workers=4)
"""


def test_a_lightning_train_loader_with_workers_is_found():
    assert findings(LIGHTNING_LOADERS.format(hook="train_dataloader"), **ONLY) == ["10:16 GPU104"]


def test_a_lightning_test_loader_read_once_by_trainer_test_is_silent():
    # trainer.test() asks for test_dataloader once per call; no epoch restarts its workers (eighth corpus W3)
    assert findings(LIGHTNING_LOADERS.format(hook="test_dataloader"), **ONLY) == []
    assert findings(LIGHTNING_LOADERS.format(hook="predict_dataloader"), **ONLY) == []


DICT_OF_LOADERS_RETURNED = """\
    import os

    import torch
    from torchvision import datasets, transforms


    def load_data(data_dir):
        image_datasets = {x: datasets.ImageFolder(os.path.join(data_dir, x), transforms.ToTensor()) for x in ["train", "val"]}
        dataloaders = {x: torch.utils.data.DataLoader(image_datasets[x], batch_size=16, shuffle=True, num_workers=4)
                       for x in ["train", "val"]}
        sizes = {x: len(image_datasets[x]) for x in ["train", "val"]}
        return dataloaders, sizes


    def train_model(model, optimizer, data_dir, num_epochs=25):
        dataloaders, dataset_sizes = load_data(data_dir)
        for epoch in range(num_epochs):
            for phase in ["train", "val"]:
                for inputs, labels in dataloaders[phase]:
                    loss = model(inputs.cuda()).sum()
                    if optimizer is not None:
                        loss.backward()
                        optimizer.step()
"""


def test_a_dict_of_loaders_returned_by_a_factory_is_followed_to_the_callers_epoch_loop():
    """The transfer-learning tutorial's shape (`return dataloaders, dataset_sizes, class_names`): the dict the
    factory builds by a comprehension over the splits is the one the caller unpacks and iterates every epoch."""
    assert findings(DICT_OF_LOADERS_RETURNED, **ONLY) == ["9:23 GPU104"]
    [d] = diagnostics(DICT_OF_LOADERS_RETURNED, **ONLY)
    assert "every pass of the loop at line 18" in d.message
    assert "num_workers=4, persistent_workers=True)" in fixed(DICT_OF_LOADERS_RETURNED, **ONLY)
    # `return dataloaders` alone, bound to one name by the caller
    alone = DICT_OF_LOADERS_RETURNED.replace("return dataloaders, sizes", "return dataloaders").replace(
        "dataloaders, dataset_sizes = load_data(data_dir)", "dataloaders = load_data(data_dir)")
    assert findings(alone, **ONLY) == ["9:23 GPU104"]


def test_a_returned_dict_of_loaders_iterated_once_or_not_unpacked_is_not_followed():
    # the caller iterates the training loader once: no loop runs it again
    once = DICT_OF_LOADERS_RETURNED.replace("for epoch in range(num_epochs):", "if num_epochs:").replace(
        'for phase in ["train", "val"]:', 'if data_dir:').replace("dataloaders[phase]", 'dataloaders["train"]')
    assert findings(once, **ONLY) == []
    # the caller keeps the whole tuple (`result[0][phase]`): not followed
    kept = DICT_OF_LOADERS_RETURNED.replace("dataloaders, dataset_sizes = load_data(data_dir)", "result = load_data(data_dir)").replace(
        "dataloaders[phase]", "result[0][phase]")
    assert findings(kept, **ONLY) == []
    # unpacked into a different number of names: which element is which is unknown
    other = DICT_OF_LOADERS_RETURNED.replace("dataloaders, dataset_sizes = load_data(data_dir)", "dataloaders, dataset_sizes, extra = load_data(data_dir)")
    assert findings(other, **ONLY) == []
