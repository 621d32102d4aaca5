"""Code that never puts its model or batches on a GPU gets no GPU-underuse findings (nineteenth corpus: judge A
wrong, judge B noise, both times).

1. A `torch.cuda.is_available()` whose answer only picks the process group's backend ("nccl" or "gloo") is no
   evidence that the module uses a GPU (`communication.backend_questions`): a batch inference script whose CNN
   and batches never move keeps its CPU loader silent (GPU101). Negatives: a branch that also picks the GPU
   (`torch.cuda.set_device(rank)`), a batch moved in the loop, and the same question asked for something else
   (`use_cuda = torch.cuda.is_available()`) keep the finding.
2. A model bound to `Net(...).to("cpu")` and moved nowhere else is CPU-resident (`Residency.is_cpu_module`): its
   evaluation loop without `no_grad` records no graph on a GPU (GPU405 silent). Negatives: the model moved to CUDA,
   moved to a device setting, or moved again later keeps the finding.
3. A training loop that feeds its loader's batches to such a model feeds no GPU (GPU101 silent: `cpu_fed_loops.py`
   already says so, batches never moved); the model on CUDA or on a device setting keeps it.
"""

from __future__ import annotations

from tests.projects_helper import lint_written

MODEL = """\
    import torch.nn as nn


    def build_model():
        return nn.Sequential(
            nn.Conv2d(3, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(12544, 512), nn.ReLU(), nn.Linear(512, 10),
        )
"""

INFERENCE = """\
    import json

    import torch
    import torch.distributed as dist
    import torchvision as tv
    from torch.utils import data
    from torchvision import transforms

    import model


    def run_inference(ml_model, data_loader, pred_dir):
        ml_model.eval()
        with torch.no_grad():
            for batch_idx, (images, label) in enumerate(data_loader):
                LOOP
                preds = ml_model(images).argmax(dim=1)
                with open(f"{pred_dir}/out_{batch_idx}.json", "w") as f:
                    json.dump(preds.tolist(), f)


    def get_data_loader(batch_size, data_dir):
        transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
        dataset = tv.datasets.CIFAR10(root=data_dir, train=False, download=True, transform=transform)
        return data.DataLoader(dataset, batch_size=batch_size)


    def initialize_distributed_backend():
    BACKEND


    if __name__ == "__main__":
        initialize_distributed_backend()
        run_inference(model.build_model(), get_data_loader(200, "data"), "predictions")
"""

IF_ELSE = """\
        if torch.cuda.is_available():
            dist.init_process_group(backend="nccl")
        else:
            dist.init_process_group(backend="gloo")
        return dist.get_world_size()"""
IF_EXP = """\
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, rank=0, world_size=1)"""
SETS_DEVICE = """\
        if torch.cuda.is_available():
            dist.init_process_group(backend="nccl")
            torch.cuda.set_device(dist.get_rank())
        else:
            dist.init_process_group(backend="gloo")"""
ASKS_FOR_ITSELF = """\
        use_cuda = torch.cuda.is_available()
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
        return use_cuda"""


def _gpu101(tmp_path, monkeypatch, backend: str, loop: str = "pass") -> list[str]:
    files = {"model.py": MODEL, "inference.py": INFERENCE.replace("    BACKEND", backend).replace("LOOP", loop)}
    found = lint_written(tmp_path, files, monkeypatch)
    assert not any("syntax" in f for f in found), found
    return [f for f in found if f.endswith("GPU101")]


def test_a_cuda_question_that_only_picks_the_backend_is_no_gpu_evidence(tmp_path, monkeypatch):
    assert _gpu101(tmp_path / "a", monkeypatch, IF_ELSE) == []
    assert _gpu101(tmp_path / "b", monkeypatch, IF_EXP) == []


def test_a_branch_that_also_picks_the_gpu_keeps_the_finding(tmp_path, monkeypatch):
    assert _gpu101(tmp_path, monkeypatch, SETS_DEVICE) == ["inference.py:25 GPU101"]


def test_batches_moved_in_the_loop_keep_the_finding(tmp_path, monkeypatch):
    assert _gpu101(tmp_path, monkeypatch, IF_ELSE, "images = images.cuda()") == ["inference.py:25 GPU101"]


def test_the_question_asked_for_the_module_itself_keeps_the_finding(tmp_path, monkeypatch):
    assert _gpu101(tmp_path, monkeypatch, ASKS_FOR_ITSELF) == ["inference.py:25 GPU101"]


NET = """\
    import torch


    class TemporalNet(torch.nn.Module):
        def __init__(self, dim_in, periods):
            super().__init__()
            self.gru = torch.nn.GRU(dim_in, 256, num_layers=2, batch_first=True)
            self.linear = torch.nn.Linear(256, periods)

        def forward(self, x):
            return self.linear(self.gru(x)[0][:, -1])
"""

EVALUATE = """\
    import numpy as np
    import torch

    from net import TemporalNet

    torch.manual_seed(0)
    torch.cuda.manual_seed(0)
    train_dataset = [(torch.randn(228, 24, 12), torch.randn(228, 1)) for _ in range(9000)]
    test_dataset = [(torch.randn(228, 24, 12), torch.randn(228, 1)) for _ in range(3000)]

    model = TemporalNet(12, 1)PLACE
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
    model.train()
    for epoch in range(30):
        loss = 0
        for x, y in train_dataset:
            loss += torch.mean((model(x) - y) ** 2)
        loss = loss / len(train_dataset)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    LATER
    predictions = []
    model.eval()
    for x, y in test_dataset:
        y_hat = model(x).squeeze().detach().numpy()
        predictions = np.append(predictions, y_hat)
"""


def _gpu405(tmp_path, monkeypatch, place: str, later: str = "") -> list[str]:
    files = {"net.py": NET, "evaluate.py": EVALUATE.replace("PLACE", place).replace("LATER", later)}
    found = lint_written(tmp_path, files, monkeypatch)
    assert not any("syntax" in f for f in found), found
    return [f for f in found if f.endswith("GPU405")]


def test_a_model_put_on_the_cpu_by_name_records_no_gpu_graph(tmp_path, monkeypatch):
    assert _gpu405(tmp_path / "a", monkeypatch, '.to("cpu")') == []
    assert _gpu405(tmp_path / "b", monkeypatch, '.to(torch.device("cpu"))') == []
    assert _gpu405(tmp_path / "c", monkeypatch, ".cpu()") == []


def test_a_model_on_cuda_keeps_the_finding(tmp_path, monkeypatch):
    assert _gpu405(tmp_path, monkeypatch, '.to("cuda")') == ["evaluate.py:26 GPU405"]


def test_a_device_setting_of_cpu_keeps_the_finding(tmp_path, monkeypatch):
    # `device = "cpu"` is the script's setting, changed at launch: not the CPU written at the move
    assert _gpu405(tmp_path, monkeypatch, '\n    device = "cpu"\n    model = model.to(device)') == ["evaluate.py:28 GPU405"]


def test_a_model_moved_again_later_keeps_the_finding(tmp_path, monkeypatch):
    assert _gpu405(tmp_path, monkeypatch, '.to("cpu")', 'model.to("cuda")') == ["evaluate.py:26 GPU405"]


DATA = """\
    import torchvision


    def mnist(train):
        return torchvision.datasets.MNIST("./", train=train, transform=torchvision.transforms.ToTensor(), download=True)
"""

TRAIN = """\
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader

    from data import mnist

    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))PLACE
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loader = DataLoader(mnist(True), batch_size=128, shuffle=True)
    for epoch in range(10):
        for x, y in loader:
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def _gpu101_loop(tmp_path, monkeypatch, place: str) -> list[str]:
    files = {"data.py": DATA, "train.py": TRAIN.replace("PLACE", place)}
    found = lint_written(tmp_path, files, monkeypatch)
    assert not any("syntax" in f for f in found), found
    return [f for f in found if f.endswith("GPU101")]


def test_a_loop_that_runs_a_model_put_on_the_cpu_by_name_feeds_no_gpu(tmp_path, monkeypatch):
    assert _gpu101_loop(tmp_path / "a", monkeypatch, '.to("cpu")') == []
    assert _gpu101_loop(tmp_path / "b", monkeypatch, ".cpu()") == []


def test_a_loop_that_runs_a_model_on_cuda_keeps_the_finding(tmp_path, monkeypatch):
    assert _gpu101_loop(tmp_path, monkeypatch, '.to("cuda")') == ["train.py:11 GPU101"]


def test_a_loop_that_runs_a_model_on_a_cpu_setting_keeps_the_finding(tmp_path, monkeypatch):
    assert _gpu101_loop(tmp_path, monkeypatch, '\n    device = "cpu"\n    net = net.to(device)') == ["train.py:13 GPU101"]
