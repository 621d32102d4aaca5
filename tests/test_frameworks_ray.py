"""Ray Train as a framework of the model: `train.torch.prepare_model(model)` places the model on the worker's
GPU and Ray Data's `ds.iter_torch_batches(...)` yields batches there, when the run's `ScalingConfig` asks for
GPUs. The model reads the source: Ray need not be installed."""

from __future__ import annotations

from tests.projects_helper import found, lint, write

UTILS = """\
    import torch
    from ray.train.torch import get_device


    def collate_fn(batch):
        tensor_batch = {}
        for key, array in batch.items():
            tensor_batch[key] = torch.as_tensor(array, dtype=torch.int64, device=get_device())
        return tensor_batch
    """

TRAIN = """\
    import sys

    import ray.train as train
    import torch
    import torch.nn as nn
    from ray.train import ScalingConfig
    from ray.train.torch import TorchTrainer
    from transformers import BertModel

    import utils


    class Classifier(nn.Module):
        def __init__(self, llm):
            super().__init__()
            self.llm = llm
            self.fc = nn.Linear(768, 4)

        def forward(self, batch):
            return self.fc(self.llm(batch["ids"])[1])


    def train_step(ds, model, loss_fn, optimizer):
        total = 0.0
        for i, batch in enumerate(ds.iter_torch_batches(batch_size=32, collate_fn=utils.collate_fn)):
            optimizer.zero_grad()
            J = loss_fn(model(batch), batch["targets"])
            J.backward()
            optimizer.step()
            total += J.detach().item()
        return total


    def eval_step(ds, model, loss_fn):
        trues = []
        with torch.inference_mode():
            for batch in ds.iter_torch_batches(batch_size=32{eval_arguments}):
                {eval_body}
                trues.extend(batch["targets"].cpu().numpy())
        return trues


    def train_loop_per_worker(config):
        model = Classifier(BertModel.from_pretrained("bert-base-uncased"))
        model = train.torch.prepare_model(model)
        loss_fn = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        for epoch in range(3):
            train_step(train.get_dataset_shard("train"), model, loss_fn, optimizer)
            eval_step(train.get_dataset_shard("val"), model, loss_fn)


    if __name__ == "__main__":
        scaling_config = ScalingConfig(num_workers=2{scaling})
        TorchTrainer(train_loop_per_worker, scaling_config=scaling_config).fit()
    """

ON_GPU = ", use_gpu=bool(int(sys.argv[1]))"


def run(tmp_path, monkeypatch, scaling=ON_GPU, eval_arguments=", collate_fn=utils.collate_fn", eval_body="model(batch)"):
    train = TRAIN.format(scaling=scaling, eval_arguments=eval_arguments, eval_body=eval_body)
    root = write(tmp_path, {"utils.py": UTILS, "train.py": train})
    return lint(root, monkeypatch, select=("GPU303", "GPU901", "GPU902", "GPU904"))


def test_a_ray_train_run_on_gpus_places_the_model_and_the_batches(tmp_path, monkeypatch):
    diagnostics = run(tmp_path, monkeypatch)
    assert sorted(found(diagnostics)) == [
        "train.py:28 GPU901",
        "train.py:30 GPU303",  # `J.detach().item()` every training step
        "train.py:39 GPU303",  # `batch["targets"].cpu()`: the collate built it on `get_device()`
        "train.py:45 GPU902",  # at `prepare_model(model)`, the move to the worker's GPU
        "train.py:47 GPU904",
    ]
    sync = next(d for d in diagnostics if d.code == "GPU303" and d.location.row == 30)
    assert sync.message == "`J.detach().item()` waits for the GPU every training step (loop at line 25)"


def test_default_ray_device_places_batches_without_a_collate_fn(tmp_path, monkeypatch):
    assert "train.py:39 GPU303" in found(run(tmp_path, monkeypatch, eval_arguments=""))


def test_a_ray_train_run_on_cpus_places_nothing(tmp_path, monkeypatch):
    # `use_gpu=False` is Ray's default: the same code on CPU workers syncs nothing and has no Tensor Cores
    assert found(run(tmp_path, monkeypatch, scaling="")) == []
    assert found(run(tmp_path, monkeypatch, scaling=", use_gpu=False")) == []


def test_batches_the_loop_copies_itself_or_left_on_the_cpu_are_host_values(tmp_path, monkeypatch):
    copied = run(tmp_path, monkeypatch, eval_body='model({"ids": batch["ids"].to("cuda")})')
    assert "train.py:39 GPU303" not in found(copied)  # the collate left the batch on the host
    on_cpu = run(tmp_path, monkeypatch, eval_arguments=', device="cpu"')
    assert "train.py:39 GPU303" not in found(on_cpu)
