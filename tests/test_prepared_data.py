"""Tenth corpus (tuned10): data prepared up front makes per-item loading trivial, and objects annotated as
such are not tensors. Each fact with the shape that goes silent and the nearby shape that is still reported.

- N4 (a): text tokenized once by `datasets.map` (then split, shuffled, subset, `train_test_split`), token ids put in
  a `Dataset.from_dict`, a multiple-choice collator: GPU101/GPU107 (and GPU102) have nothing to gain. A dataset
  streamed, images decoded per item, or a tokenizer run per item stay reported.
- `TrainingArguments` written again before a Trainer reads them configure nothing (a tutorial's first version).
- W2: `TrainingArguments` given only to a Trainer subclass that returns its own loaders configure no loader.
- GPU406 in a notebook that never calls `notebook_launcher`: its `Accelerator()` is one process, nothing to all-reduce.
- W1: `if aggregator and not aggregator.disabled:` with `aggregator: MetricAggregator | None` is a truth test of
  an object, not a wait on a GPU tensor, though its callers move it with `.to(device)`.
"""

from __future__ import annotations

from gpulint import api
from tests.conftest import findings, settings
from tests.test_notebooks import notebook

HF = """\
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

dataset = load_dataset("yelp_review_full"{streaming})
tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")


def tokenize_function(examples):
    return tokenizer(examples["text"], padding="max_length", truncation=True)


tokenized = dataset.map(tokenize_function, batched=True)
small_train = tokenized["train"].shuffle(seed=42).select(range(1000))
model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", num_labels=5).cuda()
training_args = TrainingArguments(output_dir="out")
trainer = Trainer(model=model, args=training_args, train_dataset=small_train)
trainer.train()
loader = DataLoader(small_train, shuffle=True, batch_size=8)
optimizer = torch.optim.AdamW(model.parameters())
for epoch in range(3):
    for batch in loader:
        batch = {{k: v.to("cuda") for k, v in batch.items()}}
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
"""


def test_a_split_of_a_tokenized_dataset_needs_no_workers():
    # `tokenized["train"].shuffle(seed=42).select(range(1000))`: rows of token ids, tokenized once by `map`
    assert findings(HF.format(streaming=""), select=("GPU101", "GPU102", "GPU107")) == []


def test_a_streamed_dataset_is_tokenized_per_item_and_stays_reported():
    source = HF.format(streaming=", streaming=True")
    assert findings(source, select=("GPU101", "GPU107")) == ["17:17 GPU107", "20:10 GPU101"]


def test_streaming_another_corpus_does_not_make_the_trained_one_streamed():
    # The codeparrot lesson streams one corpus to filter it and trains on a copy loaded whole.
    source = HF.format(streaming="").replace(
        'dataset = load_dataset("yelp_review_full")',
        'raw = load_dataset("codeparrot", split="train", streaming=True)\nrows = [r for r in raw]\n'
        'dataset = DatasetDict({"train": load_dataset("codeparrot-ds", split="train")})',
    ).replace("from datasets import load_dataset", "from datasets import DatasetDict, load_dataset")
    assert findings(source, select=("GPU101", "GPU107")) == []
    streamed = source.replace('load_dataset("codeparrot-ds", split="train")', 'load_dataset("codeparrot-ds", split="train", streaming=True)')
    assert findings(streamed, select=("GPU101",)) == ["22:10 GPU101"]


def test_a_train_test_split_of_tokenized_rows_is_still_token_rows():
    source = HF.format(streaming="").replace(
        'small_train = tokenized["train"].shuffle(seed=42).select(range(1000))',
        'small_train = tokenized["train"].train_test_split(test_size=0.1)["train"]',
    )
    assert findings(source, select=("GPU101", "GPU107")) == []


IMAGES = """\
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from torchvision.transforms import Compose, RandomResizedCrop, ToTensor

dataset = load_dataset("food101")
augment = Compose([RandomResizedCrop(224), ToTensor()])


def transforms(examples):
    examples["pixel_values"] = [augment(img.convert("RGB")) for img in examples["image"]]
    return examples


dataset = dataset.with_transform(transforms)
train = dataset["train"].shuffle(seed=42).select(range(1000))
loader = DataLoader(train, shuffle=True, batch_size=32)
model = torch.nn.Linear(10, 10).cuda()
for batch in loader:
    model(batch["pixel_values"].cuda()).sum().backward()
"""


def test_images_transformed_per_item_stay_reported():
    assert findings(IMAGES, select=("GPU101",)) == ["17:10 GPU101"]


def test_a_tokenizer_run_per_item_stays_reported():
    source = """\
        import torch
        from torch.utils.data import DataLoader, Dataset
        from transformers import BertTokenizer

        tokenizer = BertTokenizer.from_pretrained("bert-base-uncased")


        class Sentences(Dataset):
            def __init__(self, texts):
                self.texts = texts

            def __len__(self):
                return len(self.texts)

            def __getitem__(self, i):
                return tokenizer(self.texts[i], padding="max_length", return_tensors="pt")


        def train(model, optimizer, texts):
            loader = DataLoader(Sentences(texts), batch_size=8, shuffle=True)
            for batch in loader:
                loss = model(**{k: v.cuda() for k, v in batch.items()}).loss
                loss.backward()
                optimizer.step()
        """
    assert findings(source, select=("GPU101",)) == ["20:14 GPU101"]


TRAINER = """\
from datasets import Dataset, load_dataset
from transformers import AutoTokenizer, DataCollatorForMultipleChoice, Trainer, TrainingArguments, default_data_collator

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
{body}
args = TrainingArguments("out", num_train_epochs=3)
trainer = Trainer(model, args, train_dataset=train_dataset, data_collator={collator}, tokenizer=tokenizer)
trainer.train()
"""


def test_token_ids_put_in_a_dataset_from_dict_need_no_workers():
    body = "train_dataset = Dataset.from_dict(tokenizer(sequences))\ntrain_dataset = train_dataset.add_column('labels', labels)"
    assert findings(TRAINER.format(body=body, collator="None"), select=("GPU107",)) == []


def test_images_put_in_a_dataset_from_dict_stay_reported():
    body = "train_dataset = Dataset.from_dict({'pixel_values': images, 'labels': labels})"
    assert findings(TRAINER.format(body=body, collator="None"), select=("GPU107",)) == ["6:8 GPU107"]


MAPPED = """\
swag = load_dataset("swag", "regular")


def preprocess(examples):
    return tokenizer(examples["sent1"], examples["sent2"], truncation=True)


train_dataset = swag.map(preprocess, batched=True)["train"]
collator = {made}"""


def test_a_multiple_choice_collator_only_pads_token_ids():
    source = TRAINER.format(body=MAPPED.format(made="DataCollatorForMultipleChoice(tokenizer=tokenizer)"), collator="collator")
    assert findings(source, select=("GPU107",)) == []


def test_a_collator_bound_to_another_name_is_followed():
    source = TRAINER.format(body=MAPPED.format(made="default_data_collator"), collator="collator")
    assert findings(source, select=("GPU107",)) == []


def test_a_collator_that_processes_images_stays_reported():
    made = "lambda batch: processor(images=[b['image'] for b in batch], return_tensors='pt')"
    source = TRAINER.format(body=MAPPED.format(made=made), collator="collator")
    assert findings(source, select=("GPU107",)) == ["14:8 GPU107"]


# ---- TrainingArguments replaced before use ---------------------------------------------------------

REPLACED = """\
from transformers import Trainer, TrainingArguments

training_args = TrainingArguments(output_dir="test_trainer")
{between}training_args = TrainingArguments(output_dir="test_trainer", eval_strategy="epoch")
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
trainer.train()
"""


def test_arguments_written_again_before_any_trainer_reads_them_are_not_reported():
    assert findings(REPLACED.format(between=""), select=("GPU107",)) == ["4:17 GPU107"]


def test_arguments_read_before_they_are_replaced_stay_reported():
    source = REPLACED.format(between="first = Trainer(model=model, args=training_args, train_dataset=train_dataset)\n")
    assert findings(source, select=("GPU107",)) == ["3:17 GPU107", "5:17 GPU107"]


def test_arguments_replaced_only_on_one_branch_stay_reported():
    second = 'training_args = TrainingArguments(output_dir="test_trainer", '
    source = REPLACED.replace(second, "if again:\n    " + second)
    assert findings(source.format(between=""), select=("GPU107",)) == ["3:17 GPU107", "5:21 GPU107"]


# ---- W1: objects annotated as such --------------------------------------------------------------

AGGREGATOR = """\
import torch
from hydra.utils import instantiate
from sheeprl.utils.metric import MetricAggregator


def train(agent, optimizer, data, aggregator{annotation}):
    for batch in data:
        loss = agent(batch).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if aggregator and not aggregator.disabled:
            aggregator.update("Loss/policy_loss", loss.detach())


def main(cfg, agent, optimizer, data):
    device = torch.device("cuda")
    aggregator = instantiate(cfg.metric.aggregator).to(device)
    train(agent, optimizer, data, aggregator)
"""


def test_a_parameter_annotated_as_a_metrics_object_is_no_gpu_tensor():
    assert findings(AGGREGATOR.format(annotation=": MetricAggregator | None"), select=("GPU303",)) == []
    optional = AGGREGATOR.format(annotation=": Optional[MetricAggregator]").replace("import torch\n", "import torch\nfrom typing import Optional\n")
    assert findings(optional, select=("GPU303",)) == []


def test_without_the_annotation_the_moved_value_is_taken_for_a_tensor():
    assert findings(AGGREGATOR.format(annotation=""), select=("GPU303",)) == ["12:12 GPU303"]


def test_a_parameter_annotated_as_a_tensor_stays_reported():
    assert findings(AGGREGATOR.format(annotation=": torch.Tensor | None"), select=("GPU303",)) == ["12:12 GPU303"]
    assert findings(AGGREGATOR.format(annotation=": TensorDict"), select=("GPU303",)) == ["12:12 GPU303"]


# ---- W2: Trainers that bring their own loaders ----------------------------------------------------

OWN_LOADERS = """\
from torch.utils.data import DataLoader
from transformers import Trainer, TrainingArguments

train_dataloader = DataLoader(train_dataset, batch_size=8, shuffle=True, num_workers=4, pin_memory=True)
eval_dataloader = DataLoader(eval_dataset, batch_size=8, num_workers=4, pin_memory=True)


class CustomTrainer(Trainer):
    def get_train_dataloader(self):
        return {train}

    def get_eval_dataloader(self, eval_dataset=None):
        return eval_dataloader


training_args = TrainingArguments(output_dir="test", num_train_epochs=30)
trainer = CustomTrainer(model=model, args=training_args, train_dataset=train_dataset, eval_dataset=eval_dataset)
trainer.train()
"""


def test_a_trainer_that_returns_its_own_loaders_ignores_the_loader_settings():
    assert findings(OWN_LOADERS.format(train="train_dataloader"), select=("GPU107",)) == []


def test_a_trainer_that_defers_to_its_base_stays_reported():
    assert findings(OWN_LOADERS.format(train="super().get_train_dataloader()"), select=("GPU107",)) == ["16:17 GPU107"]


def test_arguments_also_given_to_a_plain_trainer_stay_reported():
    source = OWN_LOADERS.format(train="train_dataloader") + "Trainer(model=model, args=training_args, train_dataset=train_dataset).train()\n"
    assert findings(source, select=("GPU107",)) == ["16:17 GPU107"]


# ---- GPU406: accelerate in a one-process notebook ------------------------------------------------

SETUP = """\
from accelerate import Accelerator{launcher_import}

accelerator = Accelerator()
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
"""
ACCUMULATE = """\
for step, batch in enumerate(loader):
    loss = model(batch).sum() / 8
    accelerator.backward(loss)
    if step % 8 == 0:
        optimizer.step()
        optimizer.zero_grad()
"""


def _notebook_codes(*cells: str) -> list[tuple[int, str]]:
    report = api.check(api.Source(notebook(*cells), "nb.ipynb"), settings(select=("GPU406",)))
    return [(d.location.row, d.code) for d in report.diagnostics]


def test_accumulation_in_a_one_process_notebook_is_not_reported():
    assert _notebook_codes(SETUP.format(launcher_import=""), ACCUMULATE) == []


def test_accumulation_in_a_notebook_launched_on_several_processes_stays_reported():
    body = "".join(f"    {line}\n" for line in ACCUMULATE.splitlines())
    launched = "def training_function():\n" + body + "\nnotebook_launcher(training_function, num_processes=2)\n"
    assert _notebook_codes(SETUP.format(launcher_import="\nfrom accelerate import notebook_launcher"), launched) == [(10, "GPU406")]


def test_accumulation_in_a_script_stays_reported():
    assert findings(SETUP.format(launcher_import="") + ACCUMULATE, select=("GPU406",)) == ["7:5 GPU406"]


def test_a_parameter_annotated_as_a_data_class_keeps_its_tensor_attributes():
    # `state: RunningState` names data: its attributes are tensors where the callers moved it
    source = """\
        import torch
        from mylib.tracking import RunningState


        def train(model, optimizer, data, state: RunningState):
            for x in data:
                loss = model(x).mean()
                loss.backward()
                optimizer.step()
                print(state.total.item())


        def main(model, optimizer, data, make_state):
            state = make_state().to(torch.device("cuda"))
            train(model, optimizer, data, state)
        """
    assert findings(source, select=("GPU303",)) == ["10:15 GPU303"]
