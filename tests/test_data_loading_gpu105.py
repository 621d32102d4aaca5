"""GPU105 blocking-host-to-device-copy."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.diagnostics import Applicability, Severity
from tests.conftest import diagnostics, findings, fixed

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

ONLY = {"select": ("GPU105",)}


def test_pinned_batches_copied_without_non_blocking():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda")
        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:
            x, y = x.to(device), y.cuda()
            model(x, y).backward()
    """
    assert findings(source, **ONLY) == ["7:12 GPU105", "7:26 GPU105"]
    d = diagnostics(source, **ONLY)[0]
    assert d.severity == Severity.WARNING and d.fix.applicability == Applicability.SAFE
    assert fixed(source, unsafe=False, **ONLY) == textwrap.dedent(source).replace(
        "x.to(device), y.cuda()", "x.to(device, non_blocking=True), y.cuda(non_blocking=True)"
    )


def test_dict_batches_subscripts_and_keyword_device():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=torch.cuda.is_available())
        for batch in loader:
            inputs = {k: v.to(args.device) for k, v in batch.items()}
            labels = batch["labels"].to(device=args.device, dtype=torch.long)
            model(**inputs).loss.backward()
    """
    assert findings(source, **ONLY) == ["6:18 GPU105", "7:14 GPU105"]
    result = fixed(source, unsafe=False, **ONLY)
    assert "v.to(args.device, non_blocking=True)" in result
    assert 'batch["labels"].to(device=args.device, dtype=torch.long, non_blocking=True)' in result


def test_pinned_through_a_constant_or_a_cuda_check_and_eval_is_info():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        PIN = True
        use_cuda = torch.cuda.is_available()
        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=PIN)
        other = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=use_cuda)
        for x in other:
            model(x.cuda()).sum().backward()
        with torch.inference_mode():
            for x in loader:
                model(x.cuda())
    """
    [train, evaluation] = diagnostics(source, **ONLY)
    assert (train.location.row, train.severity) == (9, Severity.WARNING)
    assert (evaluation.location.row, evaluation.severity) == (12, Severity.INFO)


def test_fix_is_idempotent():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, num_workers=4, pin_memory=True)
        for x in loader:
            x = x.to("cuda")
    """
    once = fixed(source, **ONLY)
    assert fixed(once, **ONLY) == once and findings(once, **ONLY) == []


# ---- no finding expected ---------------------------------------------------------------------------


def test_unpinned_or_unknown_loader():
    for pin in ("", ", pin_memory=False", ", pin_memory=cfg.pin"):
        assert findings(f"""\
            import torch
            from torch.utils.data import DataLoader

            loader = DataLoader(ds, batch_size=64, num_workers=4{pin})
            for x in loader:
                x.cuda()
        """, **ONLY) == [], pin


def test_non_blocking_already_given_or_positional_arguments():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:
            x = x.cuda(non_blocking=False)
            y = y.cuda(0, True)
            z = x.to("cuda", torch.float16, True)
    """, **ONLY) == []


def test_user_managed_pinned_staging_buffer():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        staging = torch.empty(64, 3, pin_memory=True)
        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for x in loader:
            staging.copy_(x)
            model(staging.to("cuda")).sum().backward()
    """, **ONLY) == []


def test_whole_batch_of_a_custom_collate_type():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True, collate_fn=collator)
        for batch in loader:
            batch = batch.to("cuda")
            model(**batch).loss.backward()
    """, **ONLY) == []


def test_values_that_are_not_batches():
    assert findings("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for x in loader:
            mask = torch.ones(3).cuda()
            features = x.float().to("cuda")
    """, **ONLY) == []


def test_a_name_already_moved_earlier_in_the_loop_is_not_copied_again():
    # pytorch_resnet_cifar10 trainer.py: `target = target.cuda()` then `target_var = target.cuda()`.
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for input, target in loader:
            target = target.cuda()
            input_var = input.cuda()
            target_var = target.cuda()
            model(input_var, target_var).backward()
    """
    assert findings(source, **ONLY) == ["6:14 GPU105", "7:17 GPU105"]


def test_moves_in_exclusive_branches_are_both_reported():
    # pytorch/examples imagenet: `.cuda(args.gpu, non_blocking=True)` in one branch, `.to(device)` in the other.
    source = """\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)
        for images, target in loader:
            if args.gpu is not None:
                images = images.cuda(args.gpu, non_blocking=True)
            else:
                images = images.to(device)
            model(images).sum().backward()
    """
    assert findings(source, **ONLY) == ["9:18 GPU105"]


def test_iterator_recreated_when_the_epoch_ends():
    # minGPT trainer: `data_iter = iter(train_loader)` again in `except StopIteration`.
    source = """\
        import torch
        from torch.utils.data import DataLoader

        class Trainer:
            def run(self):
                self.device = "cuda"
                train_loader = DataLoader(self.ds, batch_size=64, num_workers=4, pin_memory=True)
                data_iter = iter(train_loader)
                while True:
                    try:
                        batch = next(data_iter)
                    except StopIteration:
                        data_iter = iter(train_loader)
                        batch = next(data_iter)
                    batch = [t.to(self.device) for t in batch]
                    self.model(*batch).backward()
    """
    assert findings(source, **ONLY) == ["15:22 GPU105"]
