"""An optional import of a mixed-precision library that training never uses (issue 14; shaped like
SupContrast's scripts: `try: import apex; from apex import amp, optimizers / except ImportError: pass`,
`apex.parallel.convert_syncbn_model` only, a loss module beside the script) says nothing of its precision."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

LOSSES = """\
    import torch.nn as nn


    class SupConLoss(nn.Module):
        def forward(self, features, labels=None):
            return features.pow(2).mean()
"""
MAIN = """\
    import torch
    import torchvision
    {imports}
    from losses import SupConLoss


    def set_model(opt):
        model = torchvision.models.resnet50()
        if opt.syncBN:
            model = apex.parallel.convert_syncbn_model(model)
        model = model.cuda()
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("high")
        return model, SupConLoss().cuda()


    def train(loader, model, criterion, optimizer):
        for images, labels in loader:
            images = images.cuda(non_blocking=True)
            loss = criterion(model(images), labels)
            optimizer.zero_grad()
            {backward}
            optimizer.step()


    if __name__ == "__main__":
        train(None, *set_model(None), None)
"""
OPTIONAL = "try:\n        import apex\n        from apex import amp, optimizers\n    except ImportError:\n        pass"


@pytest.mark.parametrize(
    ("imports", "backward", "expected"),
    [
        (OPTIONAL, "loss.backward()", ["main_supcon.py:26 GPU901"]),  # apex only for SyncBN: float32 training
        (OPTIONAL, "with amp.scale_loss(loss, optimizer) as scaled:\n                scaled.backward()", []),  # apex amp used
        ("import apex\n    from apex import amp, optimizers", "loss.backward()", []),  # a plain import still says it may
    ],
)
def test_an_optional_mixed_precision_import_that_training_never_uses(tmp_path, monkeypatch, imports, backward, expected):
    files = {"losses.py": LOSSES, "main_supcon.py": MAIN.format(imports=imports, backward=backward)}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU901",), preview=True)) == expected
