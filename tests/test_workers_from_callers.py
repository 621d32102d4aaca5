"""Loader factories whose `num_workers` is a parameter (issue 14, class D of the eleventh corpus: StyleTTS2's
`build_dataloader(..., num_workers=1)` called with `num_workers=2` for training and `0` for validation): each
factory call of another module gives its loader the count it passes, and a loop there that takes those batches
again every epoch restarts the workers of that call's loader only."""

from __future__ import annotations

from tests.projects_helper import found, lint, write

_FACTORY = """
    import torchvision
    from torch.utils.data import DataLoader


    def build_dataloader(root, num_workers, validation=False, batch_size=4):
        dataset = torchvision.datasets.ImageFolder(root, transform=torchvision.transforms.ToTensor())
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=not validation, num_workers=num_workers)
        return loader
"""

_TRAIN = """
    import torch
    from data import build_dataloader


    def main():
        model = torch.nn.Linear(10, 2).cuda()
        optimizer = torch.optim.Adam(model.parameters())
        train_loader = build_dataloader("data/train", {train}, batch_size=16)
        val_loader = build_dataloader("data/val", validation=True, num_workers={val})
        for epoch in range({epochs}):
            for x, y in train_loader:
                x, y = x.cuda(), y.cuda()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            with torch.no_grad():
                for x, y in val_loader:
                    model(x.cuda())


    if __name__ == "__main__":
        main()
"""


def check(tmp_path, monkeypatch, factory=_FACTORY, **given):
    values = {"train": 2, "val": 0, "epochs": 200, **given}
    root = write(tmp_path, {"data.py": factory, "train.py": _TRAIN.format(**values)})
    return lint(root, monkeypatch, select=("GPU104",))


def test_the_count_a_factory_call_passes_is_the_count_of_the_loader_its_loop_takes_again(tmp_path, monkeypatch):
    diagnostics = check(tmp_path, monkeypatch)
    assert found(diagnostics) == ["data.py:8 GPU104"]
    assert diagnostics[0].message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at train.py:11 "
        "(its batches are taken at train.py:12; the call at train.py:9 gives it 2 workers)"
    )
    # the validation call passes 0 workers, where `persistent_workers=True` raises: the fix keeps 0 working
    assert diagnostics[0].fix.edits[0].content == ", persistent_workers=num_workers > 0"


def test_a_default_count_that_another_call_overrides_with_zero_is_fixed_so_that_zero_still_works(tmp_path, monkeypatch):
    factory = _FACTORY.replace("(root, num_workers, validation=False, batch_size=4)", "(root, validation=False, batch_size=4, num_workers=4)")
    train = _TRAIN.replace(', {train}, batch_size=16)', ", batch_size=16)")
    root = write(tmp_path, {"data.py": factory, "train.py": train.format(val=0, epochs=200)})
    diagnostics = lint(root, monkeypatch, select=("GPU104",))
    assert found(diagnostics) == ["data.py:8 GPU104"]
    # `persistent_workers=True` would raise where the validation call passes 0 workers
    assert diagnostics[0].fix.edits[0].content == ", persistent_workers=num_workers > 0"


def test_calls_that_pass_no_workers_or_a_count_not_known_stay_silent(tmp_path, monkeypatch):
    assert found(check(tmp_path / "zero", monkeypatch, train=0, val=0)) == []
    # a count read at run time (`args.workers`, a config): unknown, never guessed
    assert found(check(tmp_path / "unknown", monkeypatch, train="args.workers")) == []


def test_expert_factories_and_short_runs_stay_silent(tmp_path, monkeypatch):
    kept = _FACTORY.replace("num_workers=num_workers)", "num_workers=num_workers, persistent_workers=num_workers > 0)")
    assert found(check(tmp_path / "kept", monkeypatch, factory=kept)) == []
    # the factory's count is a local, not the parameter (`num_workers = 0 if validation else num_workers`)
    local = _FACTORY.replace("        loader = ", "        workers = 0 if validation else num_workers\n        loader = ").replace(
        "num_workers=num_workers)", "num_workers=workers)"
    )
    assert found(check(tmp_path / "local", monkeypatch, factory=local)) == []
    # the only loader with workers is taken once, after training
    once = _TRAIN.replace("            with torch.no_grad():\n                for x, y in val_loader:\n                    model(", "        with torch.no_grad():\n            for x, y in val_loader:\n                model(")
    assert once != _TRAIN
    root = write(tmp_path / "once", {"data.py": _FACTORY, "train.py": once.format(train=0, val=4, epochs=200)})
    assert found(lint(root, monkeypatch, select=("GPU104",))) == []
