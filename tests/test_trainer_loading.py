"""The per-batch loading work of an HF Trainer's loaders (`analysis/trainer_loading.py`), as GPU107 asks it.

GPU107 stays silent about `dataloader_num_workers` when loading a batch is light: rows of token ids made up front
and a collator that only pads them. Round 20 taught the model three more ways rows are made up front, recurring
across the fourteenth to nineteenth corpora (both judges: noise, the collate of pre-tokenized rows is well under
1 % of the step):

- transformers' text datasets (`LineByLineTextDataset`, `TextDataset`), which tokenize their file when built;
- a text table handed to a TRL trainer that tokenizes it in its constructor (`SFTTrainer`, `DPOTrainer`, ...);
- a `datasets` table that reaches an HF Trainer through another module's function (a method only such tables
  have, `.train_test_split`, says what it is) with a collator that only pads: the rows it pads hold ids already;
  and this module's Trainer subclasses (`class RegressionTrainer(Trainer)` overriding `compute_loss`).

Each with the nearby shape that stays reported: a streamed dataset, a per-row transform, audio features padded
by a project collator, a collator that tokenizes, TRL packing, a Trainer subclass that builds its own rows.
"""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.trainer_loading import HEAVY, LIGHT, UNKNOWN, trainer_loading_work
from tests.conftest import findings
from tests.projects_helper import lint_written

ONLY = {"select": ("GPU107",)}


def work(source: str) -> list[str]:
    model = SemanticModel(cst.parse_module(textwrap.dedent(source)))
    return [trainer_loading_work(model, a.call) for a in model.frameworks.trainer_arguments]


LINE_BY_LINE = """\
from transformers import (
    DataCollatorForLanguageModeling, LineByLineTextDataset, RobertaConfig, RobertaForMaskedLM, RobertaTokenizer,
    Trainer, TrainingArguments,
)

tokenizer = RobertaTokenizer.from_pretrained("./tok")
model = RobertaForMaskedLM(config=RobertaConfig(vocab_size=52_000))
dataset = {dataset}
collator = {collator}
args = TrainingArguments(output_dir="out", num_train_epochs=1, per_device_train_batch_size=64)
trainer = Trainer(model=model, args=args, data_collator=collator, train_dataset=dataset)
trainer.train()
"""
MLM = "DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=True, mlm_probability=0.15)"


def test_a_text_dataset_tokenized_when_built_needs_no_trainer_workers():
    source = LINE_BY_LINE.format(dataset='LineByLineTextDataset(tokenizer=tokenizer, file_path="kant.txt", block_size=128)', collator=MLM)
    assert work(source) == [LIGHT]
    assert findings(source, **ONLY) == []


def test_a_project_dataset_that_tokenizes_per_item_stays_reported():
    source = LINE_BY_LINE.format(dataset='LinesDataset("kant.txt")', collator=MLM) + textwrap.dedent("""\
        class LinesDataset:
            def __init__(self, path):
                self.lines = open(path).read().splitlines()

            def __getitem__(self, i):
                return tokenizer(self.lines[i], truncation=True, max_length=128)
        """)
    assert work(source) == [UNKNOWN]
    assert findings(source, **ONLY) == ["10:8 GPU107"]


def test_a_text_dataset_with_a_collator_that_tokenizes_stays_reported():
    source = LINE_BY_LINE.format(dataset='LineByLineTextDataset(tokenizer=tokenizer, file_path="kant.txt", block_size=128)', collator="collate") + textwrap.dedent("""\
        def collate(rows):
            return tokenizer([open(r).read() for r in rows], padding=True, return_tensors="pt")
        """)
    assert findings(source, **ONLY) == ["10:8 GPU107"]


SFT = """\
from datasets import load_dataset
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

model = AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM3-3B")
dataset = load_dataset("HuggingFaceTB/smoltalk2", "SFT"{streaming})
train_dataset = dataset["everyday"].select(range(1000))
config = SFTConfig(output_dir="out", max_length=2048, dataloader_num_workers=0{packing})
trainer = SFTTrainer(model=model, args=config, train_dataset=train_dataset)
trainer.train()
"""


def test_a_text_table_a_trl_trainer_tokenizes_up_front_needs_no_workers():
    source = SFT.format(streaming="", packing="")
    assert work(source) == [LIGHT]
    assert findings(source, **ONLY) == []


def test_a_streamed_table_given_to_a_trl_trainer_stays_reported():
    source = SFT.format(streaming=", streaming=True", packing="")
    assert work(source) == [HEAVY]
    assert findings(source, **ONLY) == ["8:10 GPU107"]


def test_a_trl_trainer_asked_to_pack_stays_reported():
    # older TRL releases pack on the fly, tokenizing in a `ConstantLengthDataset` as the loader reads
    assert findings(SFT.format(streaming="", packing=", packing=True"), **ONLY) == ["8:10 GPU107"]


def test_a_trl_trainer_in_a_module_about_images_stays_reported():
    # a vision-language SFT collator runs the processor on each batch's images
    source = SFT.format(streaming="", packing="").replace("from trl", "from PIL import Image\nfrom trl")
    assert findings(source, **ONLY) == ["9:10 GPU107"]


SPLITS = {
    "data.py": """\
        from datasets import Dataset


        def fewshot_splits(dataset, sizes):
            frame = dataset.to_pandas()
            return {f"train-{n}": Dataset.from_pandas(frame.sample(n)) for n in sizes}
        """,
    "run.py": """\
        from datasets import load_dataset
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

        from data import fewshot_splits

        tokenizer = AutoTokenizer.from_pretrained("distilbert-base-uncased")
        dataset = load_dataset("SetFit/sst2")
        tokenized = dataset.map(lambda ex: tokenizer(ex["text"], truncation=True), batched=True)
        for name, split in fewshot_splits(tokenized["train"], [8, 64]).items():
            split = split.train_test_split(seed=42, test_size=0.2)
            args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, eval_strategy="epoch")
            model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased")
            trainer = Trainer(model=model, args=args, train_dataset=split["train"], eval_dataset=split["test"], {collator})
            trainer.train()
        """,
}


def test_a_table_from_another_module_padded_by_the_trainer_needs_no_workers(tmp_path, monkeypatch):
    files = {**SPLITS, "run.py": SPLITS["run.py"].format(collator="tokenizer=tokenizer")}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU107")] == []


def test_a_table_from_another_module_with_a_collator_that_tokenizes_stays_reported(tmp_path, monkeypatch):
    files = {**SPLITS, "run.py": SPLITS["run.py"].format(collator="data_collator=lambda rows: tokenizer([r['text'] for r in rows], padding=True)")}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU107")] == ["run.py:11 GPU107"]


def test_a_table_from_another_module_transformed_per_row_stays_reported(tmp_path, monkeypatch):
    run = SPLITS["run.py"].format(collator="tokenizer=tokenizer").replace(
        'split = split.train_test_split(seed=42, test_size=0.2)',
        'split = split.train_test_split(seed=42, test_size=0.2).with_transform(lambda b: tokenizer(b["text"]))',
    )
    assert [f for f in lint_written(tmp_path, {**SPLITS, "run.py": run}, monkeypatch) if f.endswith("GPU107")] == ["run.py:11 GPU107"]


SUBCLASS = """\
import torch.nn.functional as F
from datasets import Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments


class RegressionTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        return F.mse_loss(outputs.logits, labels)
{extra}

tokenizer = AutoTokenizer.from_pretrained("distilbert-base-uncased")
ds = {{"train": Dataset.from_dict({{"text": ["a", "b"], "score": [0.0, 1.0]}})}}
for split in ds:
    ds[split] = ds[split].map(lambda ex: tokenizer(ex["text"], padding="max_length", max_length=64), remove_columns=["text"])
args = TrainingArguments(output_dir="out", num_train_epochs=3)
model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased", num_labels=1)
trainer = RegressionTrainer(model, args=args, train_dataset=ds["train"], data_collator=DataCollatorWithPadding(tokenizer))
trainer.train()
"""


def test_a_trainer_subclass_that_only_changes_the_loss_reads_the_tokenized_rows():
    assert findings(SUBCLASS.format(extra=""), **ONLY) == []


def test_a_trainer_subclass_that_makes_its_own_rows_stays_reported():
    extra = """
    def _remove_unused_columns(self, dataset, description=None):
        return dataset.with_transform(lambda b: {"input_ids": [[0] * 4096 for _ in b["score"]]})
"""
    assert findings(SUBCLASS.format(extra=extra), **ONLY) == ["20:8 GPU107"]


AUDIO = """\
from datasets import Audio, load_dataset
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, WhisperForConditionalGeneration, WhisperProcessor

processor = WhisperProcessor.from_pretrained("openai/whisper-small")
common_voice = load_dataset("mozilla-foundation/common_voice_11_0", "hi", split="train")
common_voice = common_voice.cast_column("audio", Audio(sampling_rate=16000))


def prepare(batch):
    audio = batch["audio"]
    batch["input_features"] = processor.feature_extractor(audio["array"], sampling_rate=16000).input_features[0]
    batch["labels"] = processor.tokenizer(batch["sentence"]).input_ids
    return batch


common_voice = common_voice.map(prepare, remove_columns=common_voice.column_names)


class Collator:
    def __call__(self, features):
        batch = processor.feature_extractor.pad([{"input_features": f["input_features"]} for f in features], return_tensors="pt")
        batch["labels"] = processor.tokenizer.pad([{"input_ids": f["labels"]} for f in features], return_tensors="pt").input_ids
        return batch


model = WhisperForConditionalGeneration.from_pretrained("openai/whisper-small")
args = Seq2SeqTrainingArguments(output_dir="out", per_device_train_batch_size=64, max_steps=4000)
trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=common_voice, data_collator=Collator())
trainer.train()
"""


def test_log_mel_features_padded_per_batch_are_heavy_and_stay_reported():
    # 80x3000 log-mels read back from Arrow as Python lists and padded into arrays each batch
    assert work(AUDIO) == [HEAVY]
    assert findings(AUDIO, **ONLY) == ["27:8 GPU107"]


PAIRS = """\
import torch
from transformers import AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("gpt2")


class PairwiseDataset:
    def __init__(self, pairs):
        self.chosen = [tokenizer(c, padding="max_length", max_length=550, return_tensors="pt")["input_ids"] for c, _ in pairs]
        self.rejected = [tokenizer(r, padding="max_length", max_length=550, return_tensors="pt")["input_ids"] for _, r in pairs]

    def __len__(self):
        return len(self.chosen)

    def __getitem__(self, idx):
        return self.chosen[idx], self.rejected[idx]


class Collator:
    def __call__(self, data):
        batch = {{}}
        batch["input_ids"] = torch.cat({joined})
        batch["labels"] = torch.tensor([0] * len(data) + [1] * len(data))
        return batch


args = TrainingArguments(output_dir="out", num_train_epochs=5)
Trainer(model=model, args=args, train_dataset=PairwiseDataset(pairs), data_collator=Collator()).train()
"""


def test_a_collator_that_joins_lists_of_pretokenized_rows_is_light():
    # `[f[0] for f in data] + [f[1] for f in data]` builds a list; `[0] * len(data)` repeats a label
    source = PAIRS.format(joined="[f[0] for f in data] + [f[1] for f in data]")
    assert work(source) == [LIGHT]
    assert findings(source, **ONLY) == []


def test_a_collator_that_computes_on_the_rows_stays_reported():
    source = PAIRS.format(joined="[f[0] * 2 for f in data] + [f[1] for f in data]")
    assert work(source) == [UNKNOWN]
    assert findings(source, **ONLY) == ["27:8 GPU107"]
