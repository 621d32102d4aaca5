"""An `IterableDataset` that does not shard by worker: adding workers (GPU101, GPU107) or keeping them (GPU104)
would replay the whole stream in every worker, or hand each worker a stale copy of live training state."""

from __future__ import annotations

import textwrap

from tests.conftest import diagnostics, findings, fixed
from tests.projects_helper import found, lint, write

# A Lightning DQN: the dataset samples the replay buffer the training step fills.
RL_DATASET = """\
    import torch
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader, IterableDataset

    class RLDataset(IterableDataset):
        def __init__(self, buffer, sample_size=200):
            self.buffer = buffer
            self.sample_size = sample_size

        def __iter__(self):
            states, actions, rewards = self.buffer.sample(self.sample_size)
            for i in range(len(rewards)):
                yield states[i], actions[i], rewards[i]

    class DQNLightning(pl.LightningModule):
        def training_step(self, batch, batch_idx):
            self.agent.play_step(self.net)
            return self.loss(batch)

        def train_dataloader(self):
            dataset = RLDataset(self.buffer, self.hparams.episode_length)
            return DataLoader(dataset=dataset, batch_size=self.hparams.batch_size)
    """

# A stream of text tokenised and packed in `__iter__` (the shape of `ConstantLengthDataset`).
CONSTANT_LENGTH = """\
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    class ConstantLengthDataset(IterableDataset):
        def __init__(self, tokenizer, dataset, seq_length=1024):
            self.tokenizer, self.dataset, self.seq_length = tokenizer, dataset, seq_length

        def __iter__(self):
            buffer = []
            for example in self.dataset:
                buffer.extend(self.tokenizer(example["text"])["input_ids"])
                while len(buffer) >= self.seq_length:
                    yield torch.tensor(buffer[: self.seq_length])
                    buffer = buffer[self.seq_length :]

    def main(model, opt, tokenizer, raw):
        loader = DataLoader(ConstantLengthDataset(tokenizer, raw), batch_size=8)
        for batch in loader:
            model(batch.cuda()).loss.backward()
            opt.step()
    """


def test_an_unsharded_replay_buffer_stream_gets_no_workers_advice():
    assert findings(RL_DATASET, select=("GPU101",)) == []
    assert fixed(RL_DATASET, select=("GPU101",)) == fixed(RL_DATASET, select=("GPU101",), unsafe=False)


def test_an_unsharded_token_stream_gets_no_workers_advice():
    assert findings(CONSTANT_LENGTH, select=("GPU101",)) == []


def test_a_stream_that_shards_by_worker_is_still_reported_with_its_fix():
    sharded = CONSTANT_LENGTH.replace(
        "            buffer = []\n",
        "            info = torch.utils.data.get_worker_info()\n            buffer = []\n",
    )
    [d] = diagnostics(sharded, select=("GPU101",))
    assert (d.location.row, d.code) == (18, "GPU101")
    assert d.message == "`DataLoader` has no `num_workers`: batches load in the training process"
    assert d.fix is not None
    assert "DataLoader(ConstantLengthDataset(tokenizer, raw), batch_size=8, num_workers=min(8, " in fixed(sharded, select=("GPU101",))


def test_sharding_in_a_module_function_or_a_base_class_counts():
    helper = """\
        import torch
        from torch.utils.data import DataLoader, IterableDataset

        def my_shard(items):
            info = torch.utils.data.get_worker_info()
            return items if info is None else items[info.id :: info.num_workers]

        class Base(IterableDataset):
            def shard(self, items):
                info = torch.utils.data.get_worker_info()
                return items[info.id :: info.num_workers]

        class ByFunction(IterableDataset):
            def __iter__(self):
                yield from my_shard(self.files)

        class ByBase(Base):
            def __iter__(self):
                yield from self.shard(self.files)

        def main(model):
            for loader in (DataLoader(ByFunction(), batch_size=8), DataLoader(ByBase(), batch_size=8)):
                for batch in loader:
                    model(batch.cuda())
        """
    assert findings(helper, select=("GPU101",)) == ["22:20 GPU101", "22:60 GPU101"]


def test_a_stream_with_a_worker_init_fn_or_a_map_style_dataset_is_still_reported():
    source = """\
        import torch
        from torch.utils.data import DataLoader, Dataset, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from open(self.path)

        class Files(Dataset):
            def __getitem__(self, i):
                return torch.load(self.files[i])

        def main(model):
            a = DataLoader(Stream(), batch_size=8, worker_init_fn=split_files)
            b = DataLoader(Files(), batch_size=8)
            for loader in (a, b):
                for batch in loader:
                    model(batch.cuda())
        """
    assert findings(source, select=("GPU101",)) == ["13:9 GPU101", "14:9 GPU101"]


def test_workers_of_an_unsharded_stream_are_not_told_to_persist():
    source = """\
        import torch
        from torch.utils.data import DataLoader, IterableDataset

        class Stream(IterableDataset):
            def __iter__(self):
                yield from open(self.path)

        class Sharded(IterableDataset):
            def __iter__(self):
                info = torch.utils.data.get_worker_info()
                yield from open(self.paths[info.id])

        def main(model):
            a = DataLoader(Stream(), batch_size=8, num_workers=4)
            b = DataLoader(Sharded(), batch_size=8, num_workers=4)
            for epoch in range(100):
                for batch in a:
                    model(batch.cuda())
                for batch in b:
                    model(batch.cuda())
        """
    assert findings(source, select=("GPU104",)) == ["15:9 GPU104"]


HF_STREAM = """\
    from torch.utils.data import IterableDataset
    from transformers import Trainer, TrainingArguments

    class ConstantLengthDataset(IterableDataset):
        def __iter__(self):
            for example in self.dataset:
                yield self.tokenizer(example["text"])

    train_dataset = ConstantLengthDataset()
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True)
    Trainer(model=model, args=args, train_dataset=train_dataset).train()
    """


def test_the_hf_trainer_on_an_unsharded_stream_gets_no_workers_advice():
    assert findings(HF_STREAM, select=("GPU107",)) == []


def test_the_hf_trainer_on_a_sharded_stream_is_still_reported():
    sharded = HF_STREAM.replace("            for example", "            info = get_worker_info()\n            for example")
    [d] = diagnostics(sharded, select=("GPU107",))
    assert (d.location.row, d.code) == (11, "GPU107")
    assert d.message == "`TrainingArguments` leaves `dataloader_num_workers` at its default 0"


# ---- a stream class of another project module ------------------------------------------------------------

EXPERIENCE_SOURCE = """\
    from torch.utils.data import IterableDataset

    class ExperienceSourceDataset(IterableDataset):
        def __init__(self, generate_batch):
            self.generate_batch = generate_batch

        def __iter__(self):
            return self.generate_batch()
    """

DQN_MODEL = """\
    import torch
    from pytorch_lightning import LightningModule
    from torch.utils.data import DataLoader

    from rl.datamodules import ExperienceSourceDataset

    class DQN(LightningModule):
        def train_batch(self):
            for _ in range(self.batches_per_epoch):
                yield self.buffer.sample(self.batch_size)

        def train_dataloader(self):
            self.dataset = ExperienceSourceDataset(self.train_batch)
            return DataLoader(dataset=self.dataset, batch_size=self.batch_size)

        def training_step(self, batch, batch_idx):
            return self.net(batch[0].cuda()).sum()
    """


def test_an_unsharded_stream_of_another_module_gets_no_workers_advice(tmp_path, monkeypatch):
    files = {"rl/__init__.py": "", "rl/datamodules/__init__.py": "from rl.datamodules.experience import ExperienceSourceDataset\n",
             "rl/datamodules/experience.py": EXPERIENCE_SOURCE, "rl/models/dqn.py": DQN_MODEL}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU101",))) == []


def test_a_stream_of_another_module_that_shards_by_worker_is_still_reported(tmp_path, monkeypatch):
    sharded = EXPERIENCE_SOURCE.replace("            return self.generate_batch()", "            info = torch.utils.data.get_worker_info()\n            return self.generate_batch()")
    files = {"rl/__init__.py": "", "rl/datamodules/__init__.py": "from rl.datamodules.experience import ExperienceSourceDataset\n",
             "rl/datamodules/experience.py": "import torch\n" + textwrap.dedent(sharded), "rl/models/dqn.py": DQN_MODEL}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU101",))) == ["rl/models/dqn.py:14 GPU101"]


# ---- the whole dataset in one batch (GPU101) ---------------------------------------------------------------


def test_a_loader_whose_batch_is_the_whole_dataset_gets_no_workers_advice():
    source = """\
        import torch
        from torch.utils.data import DataLoader, Dataset, TensorDataset

        class Files(Dataset):
            def __getitem__(self, i):
                return torch.load(self.files[i])

        def main(model, opt, paths, load_images):
            ds = Files()
            whole = DataLoader(ds, batch_size=len(ds))
            first = DataLoader(TensorDataset(paths[:64]), batch_size=64, collate_fn=load_images)
            quarter = DataLoader(ds, batch_size=len(ds) // 4)
            other = DataLoader(ds, batch_size=len(paths))
            part = DataLoader(TensorDataset(paths[:64]), batch_size=32, collate_fn=load_images)
            for epoch in range(100):
                for loader in (whole, first, quarter, other, part):
                    for x in loader:
                        model(x.cuda()).sum().backward()
                        opt.step()
        """
    assert findings(source, select=("GPU101",)) == ["12:15 GPU101", "13:13 GPU101", "14:12 GPU101"]


def test_a_module_class_on_an_unsharded_stream_base_of_another_module_gets_no_workers_advice(tmp_path, monkeypatch):
    base = EXPERIENCE_SOURCE.replace("ExperienceSourceDataset", "StreamBase")
    model = """\
        import torch
        from torch.utils.data import DataLoader

        from rl.streams import StreamBase

        class Replay(StreamBase):
            pass

        def main(net, buffer):
            for batch in DataLoader(Replay(buffer.sample), batch_size=32):
                net(batch.cuda()).sum().backward()
        """
    files = {"rl/__init__.py": "", "rl/streams.py": base, "rl/train.py": model}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU101",))) == []
    files["rl/streams.py"] = "import torch\n" + textwrap.dedent(base).replace("        return self.generate_batch()", "        torch.utils.data.get_worker_info()\n        return self.generate_batch()")
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU101",))) == ["rl/train.py:10 GPU101"]
