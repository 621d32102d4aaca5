"""Tutorial code that moves under `if use_gpu:` and logs through a helper every step (issue 14; shaped like
pytorch-beginner's convolution_network.py with its logger.py): on GPU runs the move is what reaches the
later reads, and the parameters (and their gradients) of a GPU model are GPU tensors."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

LOGGER = """\
    class Logger:
        def __init__(self, log_dir):
            self.log_dir = log_dir

        def histo_summary(self, tag, values, step):
            print(tag, values.shape, step)
"""
TRAIN = """\
    import torch
    from torch import nn
    from torch.autograd import Variable

    from logger import Logger


    def to_np(x):
        return x.cpu().data.numpy()


    use_gpu = torch.cuda.is_available()
    model = nn.Sequential(nn.Conv2d(1, 6, 3), nn.Flatten(), nn.LazyLinear(10))
    if use_gpu:
        model = {moved}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    logger = Logger("./logs")
    for epoch in range(20):
        for i, (img, label) in enumerate(train_loader, 1):
            if use_gpu:
                img = img.cuda()
                label = label.cuda()
            img = Variable(img)
            loss = nn.functional.cross_entropy(model(img), label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            for tag, value in model.named_parameters():
                logger.histo_summary(tag, to_np(value), i)
                logger.histo_summary(tag + "/grad", to_np(value.grad), i)
                if value.grad is not None and value.requires_grad:
                    value.grad.clamp_(-1, 1)
            logger.histo_summary("images", to_np(img[:10]), i)
"""


@pytest.mark.parametrize(
    ("moved", "expected"),
    [
        ("model.cuda()", ["train.py:29 GPU303", "train.py:30 GPU303", "train.py:33 GPU303"]),
        ("model.float()", ["train.py:33 GPU303"]),  # a model left on the CPU: its parameters are host tensors
    ],
)
def test_moves_under_a_gpu_check_and_parameters_of_a_gpu_model(tmp_path, monkeypatch, moved, expected):
    files = {"logger.py": LOGGER, "train.py": TRAIN.format(moved=moved)}
    diagnostics = lint(write(tmp_path, files), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == expected
    if len(expected) > 1:
        assert diagnostics[0].message == "`to_np(value)` (`.cpu()` at train.py:9) waits for the GPU every training step (loop at line 19)"


def test_a_move_under_another_condition_may_not_have_run(tmp_path, monkeypatch):
    # `if debug:` says nothing of GPU runs: `img` may still be the CPU batch at the read
    train = TRAIN.format(moved="model.cuda()").replace("            if use_gpu:\n", "            if debug:\n")
    assert "train.py:33 GPU303" not in found(lint(write(tmp_path, {"logger.py": LOGGER, "train.py": train}), monkeypatch, select=("GPU303",)))
