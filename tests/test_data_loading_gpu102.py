"""GPU102 dataloader-without-pin-memory."""

from __future__ import annotations

import textwrap

from gpulint.diagnostics import Applicability, Severity
from tests.conftest import diagnostics, findings, fixed

ONLY = {"select": ("GPU102",)}


def test_training_loader_whose_batches_go_to_cuda():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda")
        loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            model(x, y).backward()
    """
    assert findings(source, **ONLY) == ["5:10 GPU102"]
    [d] = diagnostics(source, **ONLY)
    assert d.severity == Severity.WARNING
    assert d.fix.applicability == Applicability.SAFE
    assert "`x.to(device)` at line 7" in d.message
    assert fixed(source, unsafe=False, **ONLY) == textwrap.dedent(source).replace(
        "num_workers=4)", "num_workers=4, pin_memory=True)"
    )


def test_moves_to_an_f_string_device_or_a_gpu_variable():
    source = """\
        import torch
        from torch.utils.data import DataLoader


        def train(ds, model, rank, gpu):
            a = DataLoader(ds, batch_size=64, num_workers=4)
            for x in a:
                model(x.to(f"cuda:{rank}")).backward()
            b = DataLoader(ds, batch_size=64, num_workers=4)
            for x in b:
                model(x.to(gpu)).backward()
            c = DataLoader(ds, batch_size=64, num_workers=4)
            device = "cpu"
            for x in c:
                model(x.to(device)).backward()
    """
    assert findings(source, **ONLY) == ["6:9 GPU102", "9:9 GPU102"]


def test_device_chosen_at_run_time_pins_only_with_cuda():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        device = "cuda" if torch.cuda.is_available() else "cpu"


        def train(ds, model):
            loader = DataLoader(
                ds,
                batch_size=64,
                num_workers=2,
            )
            for batch in loader:
                model(batch.to(device)).sum().backward()
    """
    assert findings(source, **ONLY) == ["8:14 GPU102"]
    assert fixed(source, unsafe=False, **ONLY) == textwrap.dedent(source).replace(
        "num_workers=2,\n", "num_workers=2,\n        pin_memory=torch.cuda.is_available(),\n"
    )


def test_without_workers_the_fix_is_unsafe_and_the_message_says_why():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64)
        for x in loader:
            model(x.cuda()).sum().backward()
    """
    [d] = diagnostics(source, **ONLY)
    assert d.fix.applicability == Applicability.UNSAFE
    assert "num_workers > 0" in d.help
    assert fixed(source, unsafe=False, **ONLY) == textwrap.dedent(source)
    assert "pin_memory=True)" in fixed(source, unsafe=True, **ONLY)


def test_explicit_false_is_reported_with_an_unsafe_fix():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=False)
        for x in loader:
            model(x.cuda()).sum().backward()
    """
    [d] = diagnostics(source, **ONLY)
    assert d.fix.applicability == Applicability.UNSAFE
    assert "pin_memory=True)" in fixed(source, **ONLY)


def test_false_from_a_command_line_flag_is_reported_without_fix():
    source = """\
        import argparse
        import torch
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--pin-memory", action="store_true", default=False)
        args = parser.parse_args()
        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=args.pin_memory)
        for x in loader:
            model(x.cuda()).sum().backward()
    """
    [d] = diagnostics(source, **ONLY)
    assert "argparse default at train.py:6" in d.message
    assert d.fix is None


def test_eval_loader_is_info():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=256, num_workers=4)
        model.eval()
        for x in loader:
            model(x.cuda())
    """
    [d] = diagnostics(source, **ONLY)
    assert d.severity == Severity.INFO


def test_loader_passed_to_a_training_function():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        def train(model, loader, device):
            for batch in loader:
                model(batch["x"].to(device)).sum().backward()

        def main():
            train(model, DataLoader(ds, batch_size=64, num_workers=4), torch.device("cuda"))
    """
    assert findings(source, **ONLY) == ["9:18 GPU102"]


def test_fix_is_idempotent():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4)
        for x in loader:
            model(x.cuda()).sum().backward()
    """
    once = fixed(source, **ONLY)
    assert fixed(once, **ONLY) == once
    assert findings(once, **ONLY) == []


# ---- no finding expected ---------------------------------------------------------------------------


def test_no_gpu_context_cpu_or_mps_project():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("mps")
        loader = DataLoader(ds, batch_size=64, num_workers=4)
        for x in loader:
            model(x.to(device)).sum().backward()
    """, **ONLY) == []


def test_batches_moved_inside_the_model_or_by_accelerate():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        model = Net().cuda()
        loader = DataLoader(ds, batch_size=64, num_workers=4)
        loader = accelerator.prepare(loader)
        for x in loader:
            model(x).sum().backward()
        other = DataLoader(ds, batch_size=64, num_workers=4)
        for x in other:
            model(x).sum().backward()
    """, **ONLY) == []


def test_dataset_already_on_the_gpu():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        ds = TensorDataset(torch.randn(100, 3).cuda())
        loader = DataLoader(ds, batch_size=64, num_workers=4)
        for (x,) in loader:
            model(x.cuda()).sum().backward()
    """, **ONLY) == []


def test_collate_fn_that_moves_to_cuda():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        def collate(samples):
            return torch.stack(samples).to("cuda")

        loader = DataLoader(ds, batch_size=64, collate_fn=collate)
        for x in loader:
            model(x.cuda()).sum().backward()
    """, **ONLY) == []


def test_already_pinned_or_unknown():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        a = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        b = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=cfg.pin)
        c = DataLoader(ds, **loader_kwargs)
        for loader in (a, b, c):
            pass
        for x in a:
            x.cuda()
        for x in b:
            x.cuda()
        for x in c:
            x.cuda()
    """, **ONLY) == []


def test_other_libraries_dataloader():
    assert findings("""\
        import torch
        from torch_geometric.loader import DataLoader

        loader = DataLoader(ds, batch_size=64)
        for data in loader:
            model(data.to("cuda")).sum().backward()
    """, **ONLY) == []


def test_single_debug_batch_outside_a_loop():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4)
        x = next(iter(loader))
        print(model(x.cuda()))
    """, **ONLY) == []


def test_noqa_is_honoured():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4)  # noqa: GPU102 -- host RAM is tight
        for x in loader:
            model(x.cuda()).sum().backward()
    """, **ONLY) == []


# ---- rows already in memory, no workers: pinning would run in the training process -------------------

IN_MEMORY = """\
    import torch
    from torch.utils.data import DataLoader, Dataset, TensorDataset
    from torchvision import datasets

    device = torch.device("cuda")


    class Windows(Dataset):
        def __init__(self, X, Y):
            self.X = torch.from_numpy(X).float()
            self.Y = torch.from_numpy(Y).float()

        def __len__(self):
            return len(self.Y)

        def __getitem__(self, idx):
            return self.X[idx], self.Y[idx]


    features = [[torch.from_numpy(f).float(), torch.tensor(l)] for (f, l) in zip(conv_feat, labels)]
    a = DataLoader(features, batch_size=128, shuffle=True)
    b = DataLoader(Windows(X_train, Y_train), batch_size=1024, shuffle=True{workers})
    c = DataLoader(TensorDataset(X_train, Y_train), batch_size=64, shuffle=True{workers})
    d = DataLoader(datasets.ImageFolder("data/train"), batch_size=64, shuffle=True{workers})
    for x, y in a:
        model(x.to(device)).sum().backward()
    for x, y in b:
        model(x.to(device)).sum().backward()
    for x, y in c:
        model(x.to(device)).sum().backward()
    for x, y in d:
        model(x.to(device)).sum().backward()
"""


def test_in_memory_rows_without_workers_are_silent():
    # Precomputed features in a list, windows of a series held in tensors, a TensorDataset: nothing for workers
    # to do (GPU101 is silent), so pinning would be a synchronous copy in the training process. Images read
    # from disk without workers are GPU101's finding alone, whose help names `pin_memory` (analysis/loader_bound.py).
    for workers in ("", ", num_workers=0"):
        assert findings(IN_MEMORY.format(workers=workers), **ONLY) == []
    assert findings(IN_MEMORY.format(workers=""), select=("GPU101",)) == ["24:5 GPU101"]


def test_in_memory_rows_with_workers_stay_reported():
    # Workers pin in the background, off the training process: pinning pays whatever the dataset.
    assert findings(IN_MEMORY.format(workers=", num_workers=4"), **ONLY) == ["22:5 GPU102", "23:5 GPU102", "24:5 GPU102"]
