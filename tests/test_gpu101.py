"""GPU101 dataloader-without-workers: the findings and fixes a user gets."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import diagnostics, findings, fixed

GPU = 'device = torch.device("cuda")\n'
WORKERS = (
    'min(8, max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") '
    "else os.cpu_count() or 2) - 1))"
)


@pytest.mark.parametrize(
    "imports, call",
    [
        ("from torch.utils.data import DataLoader", "DataLoader(ds, batch_size=64)"),
        ("from torch.utils.data import DataLoader as DL", "DL(ds, batch_size=64)"),
        ("import torch.utils.data as tud", "tud.DataLoader(ds, batch_size=64)"),
        ("from torch.utils import data as D", "D.DataLoader(ds, batch_size=64)"),
        ("import torch.utils.data", "torch.utils.data.DataLoader(ds, batch_size=64)"),
        ("import torch.utils.data.dataloader", "torch.utils.data.dataloader.DataLoader(ds, batch_size=64)"),
        ("from torch.utils.data.dataloader import DataLoader", "DataLoader(ds, batch_size=64)"),
    ],
)
def test_reported_through_every_import_form(imports, call):
    source = f"import torch\n{imports}\n{GPU}loader = {call}\n"
    assert findings(source) == ["4:10 GPU101"]


def test_subclass_defined_in_the_module_is_a_dataloader():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        class MyLoader(DataLoader):
            pass

        loader = MyLoader(ds, batch_size=64)
        """
    assert findings(source) == ["7:10 GPU101"]


def test_literal_zero_by_keyword_and_by_position():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        a = DataLoader(ds, batch_size=64, num_workers=0)
        b = DataLoader(ds, 64, True, None, None, 0)
        c = DataLoader(ds, 64, True, None, None, 4)
        d = DataLoader(ds, batch_size=64, num_workers=4)
        """
    assert findings(source) == ["4:5 GPU101", "5:5 GPU101"]


@pytest.mark.parametrize(
    "call",
    [
        "DataLoader(ds, **kw)",
        "DataLoader(*args)",
        "DataLoader(ds, num_workers=cfg.workers)",
        "DataLoader(ds, num_workers=get_workers())",
        "DataLoader(ds, num_workers=yaml_config['workers'])",
    ],
)
def test_silent_when_the_arguments_cannot_be_known(call):
    assert findings(f"import torch\nfrom torch.utils.data import DataLoader\n{GPU}loader = {call}\n") == []


def test_silent_for_loaders_that_are_not_torchs():
    source = """\
        import torch
        from torch_geometric.loader import DataLoader
        import torch_geometric
        device = torch.device("cuda")
        a = DataLoader(ds, batch_size=64)
        b = torch_geometric.loader.DataLoader(ds)
        """
    assert findings(source) == []


def test_silent_without_gpu_context():
    source = """\
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=64)
        """
    assert findings(source) == []


def test_a_cuda_f_string_is_gpu_context():
    source = """\
        from torch.utils.data import DataLoader
        def main(rank):
            loader = DataLoader(ds, batch_size=64)
            for batch in loader:
                batch.to(f"cuda:{rank}")
        """
    assert findings(source, select=("GPU101",)) == ["3:14 GPU101"]
    assert findings(source.replace('f"cuda:{rank}"', 'f"{kind}cuda:{rank}"'), select=("GPU101",)) == []


def test_silent_for_cuda_resident_datasets():
    source = """\
        import torch
        from torch.utils.data import DataLoader, Dataset, TensorDataset
        device = torch.device("cuda")
        x = torch.randn(100, 3).cuda()
        a = DataLoader(TensorDataset(x), batch_size=64)

        class OnGpu(Dataset):
            def __getitem__(self, i):
                return torch.ones(3).to(device)

        b = DataLoader(OnGpu(), batch_size=64)

        def to_gpu(batch):
            return [t.cuda() for t in batch]

        c = DataLoader(ds, batch_size=64, collate_fn=to_gpu)
        """
    assert findings(source, select=("GPU101",)) == []


def test_silent_for_a_lambda_collate_that_calls_a_function_moving_to_cuda():
    # a benchmark's `collate_fn=lambda x: collator(x, vocab)`, whose function moves each clip to the GPU: forked
    # workers could not run it
    source = """\
        import torch
        from torch.utils.data import DataLoader

        def collator(batch, vocab, use_perf=False):
            clips = [item["audio"].to("cuda") for item in batch]
            return clips, [vocab[c] for item in batch for c in item["text"]]

        loader = DataLoader(ds, batch_size=8, num_workers=0, collate_fn=lambda x: collator(x, vocab))
        for clips, text in loader:
            model([c.to("cuda") for c in clips], text)
        """
    assert findings(source, select=("GPU101",)) == []
    # a lambda over a function that leaves the batch on the CPU is reported
    assert findings(source.replace('clips = [item["audio"].to("cuda")', 'clips = [item["audio"].float()'), select=("GPU101",)) == ["8:10 GPU101"]


def test_argparse_default_is_reported_with_its_line_and_fixed_at_the_definition():
    source = """\
        import argparse
        import torch
        from torch.utils.data import DataLoader

        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default=0)
        device = torch.device("cuda")

        if __name__ == "__main__":
            args = parser.parse_args()
            loader = DataLoader(ds, batch_size=64, num_workers=args.workers)
        """
    [d] = diagnostics(source)
    assert (d.code, d.location.row, d.location.column) == ("GPU101", 11, 14)
    assert "argparse default at train.py:6" in d.message
    assert fixed(source) == textwrap.dedent(
        f"""\
        import argparse
        import torch
        from torch.utils.data import DataLoader
        import os

        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default={WORKERS})
        device = torch.device("cuda")

        if __name__ == "__main__":
            args = parser.parse_args()
            loader = DataLoader(ds, batch_size=64, num_workers=args.workers)
        """
    )


def test_argparse_dest_and_args_parameter():
    source = """\
        import argparse
        import torch
        from torch.utils.data import DataLoader

        def get_parser():
            p = argparse.ArgumentParser()
            p.add_argument("-j", "--data-workers", dest="workers", type=int, default=0)
            return p

        def main(args):
            device = torch.device("cuda")
            return DataLoader(ds, num_workers=args.workers)
        """
    [d] = diagnostics(source)
    assert "argparse default at train.py:7" in d.message


def test_module_constant_and_function_default():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        WORKERS = 0

        def make(ds, workers=0):
            return DataLoader(ds, num_workers=workers)

        a = DataLoader(ds, num_workers=WORKERS)
        """
    messages = [d.message for d in diagnostics(source)]
    assert any("function default at train.py:6" in m for m in messages)
    assert any("module constant at train.py:4" in m for m in messages)


def test_function_default_is_not_trusted_when_callers_pass_the_argument():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def make(ds, workers=0):
            return DataLoader(ds, num_workers=workers)

        loader = make(ds, workers=8)
        """
    assert findings(source) == []


def test_fix_keeps_one_argument_per_line_with_trailing_comma():
    source = """\
        import os
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def main():
            loader = DataLoader(
                ds,
                batch_size=64,
            )
            return loader
        """
    assert fixed(source) == textwrap.dedent(
        f"""\
        import os
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def main():
            loader = DataLoader(
                ds,
                batch_size=64,
                num_workers={WORKERS},
            )
            return loader
        """
    )


def test_fix_uses_the_configured_worker_expression_and_needs_unsafe():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def main():
            return DataLoader(ds, batch_size=64)
        """
    assert fixed(source, unsafe=False) == textwrap.dedent(source)
    out = fixed(source, rule_options=(("GPU101", (("workers", "4"),)),))
    assert "DataLoader(ds, batch_size=64, num_workers=4)" in out
    assert "import os" not in out


def test_no_fix_for_an_unguarded_script():
    # An unsharded IterableDataset is not reported at all (tests/test_data_loading_iterable_streams.py).
    unguarded = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        loader = DataLoader(ds, batch_size=4)
        """
    [d] = diagnostics(unguarded)
    assert d.fix is None and "__main__" in d.help


def test_severity_warning_for_training_info_for_evaluation():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def main(model, opt):
            train = DataLoader(ds, batch_size=64)
            val = DataLoader(ds, batch_size=64)
            for x in train:
                model(x).sum().backward()
                opt.step()
            with torch.no_grad():
                for x in val:
                    model(x)
        """
    severities = [d.severity.value for d in diagnostics(source)]
    assert severities == ["warning", "info"]


def test_a_tensor_dataset_named_or_not_has_nothing_for_workers_to_do():
    # Indexing in-memory tensors is cheaper than a worker's inter-process copy (batch_cost.py).
    source = """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        device = torch.device("cuda")
        def main(x, y):
            a = DataLoader(TensorDataset(x, y), shuffle=True)
            ds = TensorDataset(x, y)
            b = DataLoader(ds, shuffle=True)
        """
    assert diagnostics(source, select=("GPU101",)) == []


def test_severity_of_a_shuffled_eval_only_loader_is_info_like_gpu102_and_gpu104():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def main(model, opt):
            val = DataLoader(ds, batch_size=64, shuffle=True)
            with torch.no_grad():
                for x in val:
                    model(x.to(device))
        """
    assert [(d.code, d.severity.value) for d in diagnostics(source, select=("GPU101", "GPU102", "GPU104"))] == [
        ("GPU101", "info"),
        ("GPU102", "info"),
    ]


def test_suppressed_line_is_neither_reported_nor_fixed():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def main():
            a = DataLoader(ds, batch_size=64)  # noqa: GPU101
            # gpulint: ignore[GPU101]
            b = DataLoader(ds, batch_size=64)
            c = DataLoader(ds, batch_size=64)  # noqa: GPU102
            return a, b, c
        """
    assert findings(source) == ["8:9 GPU101"]
    out = fixed(source)
    assert "a = DataLoader(ds, batch_size=64)  # noqa: GPU101" in out
    assert "b = DataLoader(ds, batch_size=64)\n" in out


def test_one_name_rebound_to_several_loaders_keeps_each_loaders_own_uses():
    # A DataLoader lesson: `dataloader` is bound to a new loader cell after cell. The first one hands out
    # one batch (`next(iter(...))`), the second is iterated for real: only the second is reported.
    source = """\
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        dataset = ImageFolder("data/dogcat/", transform=transform)
        dataloader = DataLoader(dataset, batch_size=3, shuffle=True, num_workers=0)
        dataiter = iter(dataloader)
        imgs, labels = next(dataiter)

        dataloader = DataLoader(dataset, batch_size=64, shuffle=True)
        for epoch in range(10):
            for imgs, labels in dataloader:
                loss = model(imgs.cuda(), labels.cuda())
                loss.backward()
        """
    assert findings(source, select=("GPU101",)) == ["9:14 GPU101"]


CPU_LESSON = """\
    import torch
    from torch.utils.data import DataLoader
    from model.lenet import LeNet
    from tools.my_dataset import RMBDataset

    torch.cuda.manual_seed(1)
    train_data = RMBDataset(data_dir="rmb/train", transform=train_transform)
    train_loader = DataLoader(dataset=train_data, batch_size=16, shuffle=True)
    net = LeNet(classes=2)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    for epoch in range(10):
        for inputs, labels in train_loader:
            loss = criterion(net(inputs), labels)
            loss.backward()
            optimizer.step()
    """


def test_a_lesson_trained_on_the_cpu_is_silent():
    # Nothing in the module names a device (a CUDA seed is no GPU work): no GPU waits for the batches.
    assert findings(CPU_LESSON, select=("GPU101", "GPU103", "GPU104")) == []


@pytest.mark.parametrize(
    "change",
    [
        ("net = LeNet(classes=2)", "net = LeNet(classes=2).to(torch.device('cuda'))"),  # the model is moved
        ("loss = criterion(net(inputs), labels)", "loss = criterion(net(inputs.cuda()), labels.cuda())"),  # the batches
        ("net = LeNet(classes=2)", "net = LeNet(classes=2, device=device)"),  # a device handed over
    ],
)
def test_the_same_lesson_on_the_gpu_is_reported(change):
    source = CPU_LESSON.replace(*change)
    assert findings(source, select=("GPU101",)) == ["8:16 GPU101"]


def test_a_loader_lesson_that_only_prints_its_batches_is_silent():
    # Samplers and collate functions shown by printing what the loader hands out: nothing is computed.
    source = """\
        import torch
        from torch.utils.data import DataLoader, WeightedRandomSampler

        x = torch.zeros(3).cuda()
        sampler = WeightedRandomSampler(weights, num_samples=9, replacement=True)
        dataloader = DataLoader(dataset, batch_size=3, sampler=sampler)
        for datas, labels in dataloader:
            print(labels.tolist(), datas.size())
        """
    assert findings(source, select=("GPU101",)) == []
    computed = source.replace("print(labels.tolist(), datas.size())", "print(model(datas.cuda()).sum())")
    assert findings(computed, select=("GPU101",)) == ["6:14 GPU101"]


def test_a_dataset_returned_in_a_tuple_by_a_function_of_the_module():
    # `in_vocab, out_vocab, dataset = read_data(n)`: a TensorDataset of padded ids, indexed in memory.
    source = """\
        import torch
        import torch.utils.data as Data

        def read_data(max_seq_len):
            in_vocab, in_data = build(max_seq_len)
            out_vocab, out_data = build(max_seq_len)
            return in_vocab, out_vocab, Data.TensorDataset(in_data, out_data)

        def train(model, dataset, batch_size, num_epochs):
            data_iter = Data.DataLoader(dataset, batch_size, shuffle=True)
            for epoch in range(num_epochs):
                for X, Y in data_iter:
                    model(X.cuda(), Y.cuda()).backward()

        in_vocab, out_vocab, dataset = read_data(7)
        train(model, dataset, 2, 50)
        """
    assert findings(source, select=("GPU101",)) == []
    decoded = source.replace("Data.TensorDataset(in_data, out_data)", "ImageFolder(in_data, transform=augment)")
    assert findings(decoded, select=("GPU101",)) == ["10:17 GPU101"]


RANDOM_WINDOW = """\
    import gzip
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

    class TextSamplerDataset(Dataset):
        def __init__(self, data, seq_len):
            super().__init__()
            self.data = data
            self.seq_len = seq_len

        def __getitem__(self, index):
            rand_start = torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,)).item()
            return self.data[rand_start: rand_start + self.seq_len + 1].clone().long()

        def __len__(self):
            return self.data.size(0) // self.seq_len

    def train(model, seq_len=1024, batch_size=4):
        with gzip.open("./data/enwik8.gz") as file:
            data = np.frombuffer(file.read(int(95e6)), dtype=np.uint8).copy()
        data_train = torch.from_numpy(data).clone()
        loader = DataLoader(TextSamplerDataset(data_train, seq_len), batch_size=batch_size, drop_last=True)
        for batch in loader:
            model(batch.cuda()).backward()
    """


def test_a_random_window_of_an_in_memory_tensor_has_nothing_for_workers_to_do():
    # `torch.randint(0, n - self.seq_len - 1, (1,))` draws where to slice: a random index into a tensor held in
    # memory (a few microseconds a sample), whatever `seq_len` is (a bound of the slice, not data read).
    assert findings(RANDOM_WINDOW, select=("GPU101",)) == []
    tensor = RANDOM_WINDOW.replace("(1,)).item()", "(1,))").replace(".clone().long()", ".long()")
    assert findings(tensor, select=("GPU101",)) == []
    python_random = RANDOM_WINDOW.replace(
        "torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,)).item()",
        "random.randint(0, self.data.shape[0] - self.seq_len - 1)",
    ).replace("import gzip", "import gzip\nimport random")
    assert findings(python_random, select=("GPU101",)) == []
    numpy_random = RANDOM_WINDOW.replace(
        "torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,)).item()",
        "np.random.randint(0, len(self.data) - self.seq_len - 1)",
    )
    assert findings(numpy_random, select=("GPU101",)) == []
    many = numpy_random.replace("- self.seq_len - 1)", "- self.seq_len - 1, size=8)[0]")
    assert findings(many, select=("GPU101",)) == ["23:14 GPU101"]  # eight draws: not one index (kept reported)


@pytest.mark.parametrize(
    "old, new",
    [
        # a draw of a whole sample (random pixels, random ids) is work per item, not an index
        ("torch.randint(0, self.data.size(0) - self.seq_len - 1, (1,)).item()",
         "torch.randint(0, self.data.size(0) - self.seq_len - 1, (self.seq_len,)).sum().item()"),
        # arithmetic on the sample itself (normalising it) is work per item
        (".clone().long()", ".float() / self.seq_len"),
        # the data is read from a file per item
        ("self.data[rand_start: rand_start + self.seq_len + 1].clone().long()",
         "torch.load(self.data)[rand_start: rand_start + self.seq_len + 1]"),
    ],
)
def test_a_random_window_with_per_item_work_is_reported(old, new):
    assert old in RANDOM_WINDOW
    assert findings(RANDOM_WINDOW.replace(old, new), select=("GPU101",)) == ["23:14 GPU101"]


ONE_VIDEO = """\
    import decord
    import torch
    from torch.utils.data import Dataset


    class OneVideoDataset(Dataset):
        def __init__(self, video_path, n_frames=24):
            self.video_path = video_path
            self.n_frames = n_frames

        def __len__(self):
            return {length}

        def __getitem__(self, index):
            frames = decord.VideoReader(self.video_path).get_batch(list(range(self.n_frames)))
            return {{"pixel_values": torch.as_tensor(frames.asnumpy()).permute(0, 3, 1, 2) / 127.5 - 1.0}}
"""
ONE_VIDEO_TRAIN = """\
    import torch
    from dataset import OneVideoDataset


    def main(video_path, model, optimizer, train_batch_size=1, epochs=500):
        train_dataset = OneVideoDataset(video_path)
        train_dataloader = torch.utils.data.DataLoader(train_dataset, {batch})
        model.to("cuda")
        for epoch in range(epochs):
            for batch in train_dataloader:
                loss = model(batch["pixel_values"].to("cuda")).mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize("batch", ["batch_size=train_batch_size", "batch_size=4", "shuffle=True"])
def test_silent_for_a_data_set_of_one_sample_of_another_module(tmp_path, monkeypatch, batch):
    # `__len__` returns 1: each epoch is one batch, loaded after `iter()`; workers could prefetch nothing
    from tests.projects_helper import lint_written

    files = {"dataset.py": ONE_VIDEO.format(length="1"), "train.py": ONE_VIDEO_TRAIN.format(batch=batch)}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU101" in f] == []


def test_a_literal_length_no_larger_than_the_batch_is_one_batch_a_pass(tmp_path, monkeypatch):
    from tests.projects_helper import lint_written

    files = {"dataset.py": ONE_VIDEO.format(length="4"), "train.py": ONE_VIDEO_TRAIN.format(batch="batch_size=4")}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU101" in f] == []


@pytest.mark.parametrize(
    "length, batch",
    [
        ("4", "batch_size=2"),  # two batches a pass: the second can load while the first trains
        # a sampler may draw the one sample many times a pass
        ("1", "batch_size=1, sampler=torch.utils.data.RandomSampler(train_dataset, replacement=True, num_samples=100)"),
        ("len(self.frames)", "batch_size=1"),  # a length the code does not write
    ],
)
def test_reported_when_a_pass_may_hold_more_than_one_batch(tmp_path, monkeypatch, length, batch):
    from tests.projects_helper import lint, lint_written

    files = {"dataset.py": ONE_VIDEO.format(length=length), "train.py": ONE_VIDEO_TRAIN.format(batch=batch)}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU101" in f] == ["train.py:7 GPU101"]
    (diagnostic,) = [d for d in lint(tmp_path, monkeypatch) if d.code == "GPU101"]
    assert diagnostic.message.startswith("`DataLoader` has no `num_workers`: batches load in the training process")


def test_silent_for_a_data_set_class_of_this_module_with_one_sample():
    source = textwrap.dedent(ONE_VIDEO.format(length="1")) + textwrap.dedent(
        ONE_VIDEO_TRAIN.format(batch="batch_size=1").replace("from dataset import OneVideoDataset\n", "")
    ).replace("import torch\n\n\n", "\n\n", 1)
    assert [f for f in findings(source) if "GPU101" in f] == []
    assert [f for f in findings(source.replace("return 1", "return 2")) if "GPU101" in f] != []


# r23f: windows sliced from arrays unpacked from one pickle, with an `np.arange` of positions per item.
WINDOWS = """\
    import pickle
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Windows(Dataset):
        def __init__(self, path, seq_len=192):
            self.seq_len = seq_len
            with open(path, "rb") as f:
                self.values, self.mask = pickle.load(f)
            self.starts = np.arange(0, len(self.values) - seq_len, 24)

        def __getitem__(self, i):
            start = self.starts[i]
            return {
                "values": self.values[start : start + self.seq_len],
                "mask": self.mask[start : start + self.seq_len],
                "positions": np.arange(self.seq_len) * 1.0,
            }

        def __len__(self):
            return len(self.starts)


    def main(model):
        loader = DataLoader(Windows("data.pkl"), batch_size=8, shuffle=True)
        for epoch in range(10):
            for batch in loader:
                model(batch["values"].cuda()).backward()
    """


def test_windows_of_arrays_unpacked_from_a_pickle_with_positions_are_cheap():
    # each part of `pickle.load(f)` lives in memory like the whole; `np.arange(self.seq_len) * 1.0` is positions
    assert findings(WINDOWS, select=("GPU101",)) == []
    torch_positions = WINDOWS.replace("np.arange(self.seq_len) * 1.0", "torch.arange(0, self.seq_len)")
    assert findings(torch_positions, select=("GPU101",)) == []


@pytest.mark.parametrize(
    "old, new",
    [
        # arithmetic on the sample (scaling the window) is work per item
        ('"values": self.values[start : start + self.seq_len]', '"values": self.values[start : start + self.seq_len] * 2.0'),
        # a range as long as a value of the data is not a window's positions
        ("np.arange(self.seq_len) * 1.0", "np.arange(self.values[start]) * 1.0"),
        # parts of what an unknown library call returns may be read lazily
        ("pickle.load(f)", "loadlib.open_arrays(f)"),
    ],
)
def test_windows_with_per_item_work_or_unknown_storage_are_reported(old, new):
    assert old in WINDOWS
    assert findings(WINDOWS.replace(old, new), select=("GPU101",)) == ["27:14 GPU101"]


NEVER_READ = """\
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms


    def main(model):
        train = datasets.ImageFolder("train", transform=transforms.ToTensor())
        val = datasets.ImageFolder("val", transform=transforms.ToTensor())
        train_loader = DataLoader(train, batch_size=64, shuffle=True)
        val_loader = DataLoader(val, batch_size=64)
        for images, labels in train_loader:
            model(images.cuda()).sum().backward()


    if __name__ == "__main__":
        main(torch.nn.Linear(3, 1))
    """


def test_a_function_local_loader_nothing_reads_is_not_reported():
    # `val_loader` is never read: it is dropped when `main` returns, and no batch of it is ever loaded
    assert findings(NEVER_READ, select=("GPU101",)) == ["9:20 GPU101"]


@pytest.mark.parametrize(
    "old, new",
    [
        # declared global: other code may read it after `main` returns
        ("    def main(model):\n", "    def main(model):\n        global val_loader\n"),
        # the function hands out its namespace by string
        ("            model(images.cuda()).sum().backward()\n", "            model(images.cuda()).sum().backward()\n        return locals()\n"),
    ],
)
def test_a_local_loader_that_can_escape_by_name_keeps_the_finding(old, new):
    assert old in NEVER_READ
    assert len(findings(NEVER_READ.replace(old, new), select=("GPU101",))) == 2


COMPOSED_TO_DEVICE = """\
    import torch
    from torch.utils.data import DataLoader
    from torchvision import transforms
    from torchvision.datasets import MNIST

    device = "cuda" if torch.cuda.is_available() else "cpu"
    transform = transforms.Compose([
        transforms.ToTensor(),
        transforms.Normalize([0.5], [0.5]),
        transforms.Lambda(lambda x: x.to(device)),
    ])
    train = MNIST("data", transform=transform, train=True, download=True)
    loader = DataLoader(train, batch_size=256, shuffle=True)
    model = torch.nn.Linear(784, 10).to(device)
    for epoch in range(5):
        for x, y in loader:
            model(x.view(len(x), -1)).sum().backward()
    """


def test_a_composed_transform_that_moves_items_to_cuda_is_not_reported():
    # the items are CUDA tensors: forked workers could not make them (CUDA in a forked process fails)
    assert findings(COMPOSED_TO_DEVICE, select=("GPU101",)) == []
    on_cpu = COMPOSED_TO_DEVICE.replace("    transforms.Lambda(lambda x: x.to(device)),\n", "")
    assert findings(on_cpu, select=("GPU101",)) == ["12:10 GPU101"]
