"""Tenth corpus, round 7 (noise10): data prepared up front and evaluation passes run once, the shapes that
were left (issue 13, N4 and N6 in `bench/results/recall_j.md`). Each fact with the shape that goes silent and
the nearby shape that is still reported.

- Rows formatted onto the GPU (`set_format(type="torch", device="cuda")`): GPU101/GPU102 cannot help.
- A table saved by a preparation script and loaded with `datasets.load_from_disk` in a text-only module: GPU107
  (and GPU101/GPU102) have nothing to gain; a module about images, or one that transforms rows as they are read, stays.
- Splits replaced in a loop over their names (`for split in ["train", "valid"]: ds[split] = TensorDataset(...)`).
- GPU105 on a pinned loader of token ids: the copy takes microseconds, `non_blocking` gains nothing.
- An evaluation loop run once after training that opens `with torch.no_grad():` in its own body (not around it).
"""

from __future__ import annotations

import pytest

from tests.conftest import findings
from tests.test_notebooks import check, notebook

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

GPU_FORMAT = """\
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from transformers import LayoutLMv2ForTokenClassification, LayoutLMv2Processor

datasets = load_dataset("nielsr/funsd")
processor = LayoutLMv2Processor.from_pretrained("microsoft/layoutlmv2-base-uncased")


def preprocess_data(examples):
    return processor(examples["image"], examples["words"], boxes=examples["bboxes"], padding="max_length")


train_dataset = datasets["train"].map(preprocess_data, batched=True)
train_dataset.set_format(type="torch"{device})
train_dataloader = DataLoader(train_dataset, batch_size=4, shuffle=True)
model = LayoutLMv2ForTokenClassification.from_pretrained("microsoft/layoutlmv2-base-uncased").cuda()
optimizer = torch.optim.AdamW(model.parameters())
for epoch in range(6):
    for batch in train_dataloader:
        batch = {{k: v.to("cuda") for k, v in batch.items()}}
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_rows_formatted_on_the_gpu_need_no_workers_or_pinning():
    # the formatter makes every row's tensors on the GPU: workers and pinning have nothing to do (and would fail)
    assert findings(GPU_FORMAT.format(device=', device="cuda"'), select=("GPU101", "GPU102")) == []


def test_rows_formatted_as_cpu_tensors_stay_reported():
    assert findings(GPU_FORMAT.format(device=""), select=("GPU101", "GPU102")) == ["16:20 GPU101", "16:20 GPU102"]


def test_a_format_reset_before_the_loader_decides():
    source = GPU_FORMAT.format(device=', device="cuda"').replace(
        "train_dataloader = DataLoader(", "train_dataset.reset_format()\ntrain_dataloader = DataLoader("
    )
    assert findings(source, select=("GPU101",)) == ["17:20 GPU101"]


SAVED = """\
import argparse

from datasets import load_from_disk
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--training_dir", type=str)
args = parser.parse_args()
train_dataset = load_from_disk(args.training_dir)
{extra}model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased")
tokenizer = AutoTokenizer.from_pretrained("distilbert-base-uncased")
training_args = TrainingArguments(output_dir="out", num_train_epochs=3)
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset, tokenizer=tokenizer)
trainer.train()
"""


def test_a_saved_text_table_needs_no_trainer_workers():
    # another script tokenized and saved it: the Trainer's loader reads rows of ids back from Arrow
    assert findings(SAVED.format(extra=""), select=("GPU107",)) == []


def test_a_saved_table_in_a_module_about_images_stays_reported():
    # pixel values stored as nested lists are decoded back into Python floats for every item
    source = SAVED.format(extra='image_size = list(train_dataset[0]["pixel_values"][0])\n')
    assert findings(source, select=("GPU107",)) == ["13:17 GPU107"]


def test_a_saved_table_transformed_per_row_stays_reported():
    source = SAVED.format(extra="train_dataset.set_transform(lambda batch: tokenizer(batch['text']))\n")
    assert findings(source, select=("GPU107",)) == ["13:17 GPU107"]


SPLITS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from utils import get_and_tokenize_dataset, load_wavs

datasets = get_and_tokenize_dataset("data/")
for split_name in ["train", "valid"]:
    tensor = torch.tensor(datasets[split_name], dtype=torch.long)
    datasets[split_name] = {last}
train_loader = DataLoader(datasets["train"], batch_size=32, shuffle=True)
model = torch.nn.Embedding(100, 8).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x in train_loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()
"""


def test_splits_replaced_by_tensors_in_a_loop_over_their_names_need_no_workers():
    assert findings(SPLITS.format(last="tensor.narrow(0, 0, 1024).view(-1, 64)"), select=("GPU101",)) == []
    assert findings(SPLITS.format(last="TensorDataset(tensor)"), select=("GPU101",)) == []


def test_splits_replaced_by_data_loaded_per_item_stay_reported():
    assert findings(SPLITS.format(last="load_wavs(tensor)"), select=("GPU101",)) == ["9:16 GPU101"]


PINNED = """\
import torch
{imports}from torch.utils.data import DataLoader

{dataset}
loader = DataLoader(train_set, batch_size=8, shuffle=True, pin_memory=True)
model = {model}.cuda()
optimizer = torch.optim.AdamW(model.parameters())
for epoch in range(3):
    for batch in loader:
        batch = {{k: v.to("cuda") for k, v in batch.items()}}
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
"""


def test_a_blocking_copy_of_pinned_token_ids_is_not_reported():
    # 8 rows of token ids are a few KB: the copy takes microseconds, blocking or not
    source = PINNED.format(
        imports="from datasets import load_dataset\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n",
        dataset='tokenizer = AutoTokenizer.from_pretrained("gpt2")\n'
        'raw = load_dataset("ought/raft", "twitter_complaints")\n'
        'tokenized = raw.map(lambda b: tokenizer(b["Tweet text"], padding="max_length"), batched=True)\n'
        "train_set = tokenized[\"train\"].with_format(\"torch\")",
        model='AutoModelForCausalLM.from_pretrained("gpt2")',
    )
    assert findings(source, select=("GPU105",)) == []


def test_a_blocking_copy_of_pinned_images_stays_reported():
    source = PINNED.format(
        imports="import torchvision\n",
        dataset='train_set = torchvision.datasets.ImageFolder("data/", transform=torchvision.transforms.ToTensor())',
        model="torchvision.models.resnet50()",
    )
    assert findings(source, select=("GPU105",)) == ["11:21 GPU105"]


EVAL_INSIDE = """\
import torch
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda")
train_set = torchvision.datasets.CIFAR10(".", train=True, transform=torchvision.transforms.ToTensor())
test_set = torchvision.datasets.CIFAR10(".", train=False, transform=torchvision.transforms.ToTensor())
model = torchvision.models.resnet50().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train_dl = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
test_dl = DataLoader(test_set, batch_size=64)


def evaluate():
    correct = 0
    model.eval()
    for x, y in test_dl:
        x = x.to(device)
        y = y.to(device)
        with torch.no_grad():
            out = model(x)
        correct += (out.argmax(-1) == y).float().sum()
    return correct


for epoch in range(10):
    model.train()
    for x, y in train_dl:
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
{after}"""


def test_a_final_pass_that_switches_autograd_off_in_its_body_is_one_off():
    # `for batch in test_dl: with torch.no_grad(): ...` run once after the epochs: its loader's workers and
    # pinning would save next to nothing in the run
    source = EVAL_INSIDE.format(after="print(evaluate())\n")
    assert findings(source, select=("GPU101", "GPU102")) == []


def test_the_same_pass_every_epoch_stays_reported():
    source = EVAL_INSIDE.format(after="    print(evaluate())\n")
    assert findings(source, select=("GPU101", "GPU102")) == ["11:11 GPU101"]  # (naming `pin_memory`: loader_bound.py)
    workers = source.replace("test_dl = DataLoader(test_set, batch_size=64)", "test_dl = DataLoader(test_set, batch_size=64, num_workers=2)")
    assert findings(workers, select=("GPU101", "GPU102")) == ["11:11 GPU102"]


SNIPPET = """\
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

training_args = TrainingArguments("bert-finetuned-mrpc", save_strategy="epoch", push_to_hub=True)
"""
HUB = 'model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased")\nmodel.push_to_hub("dummy-model")\n'
TRAIN = "trainer = Trainer(model=model, args=training_args, train_dataset=train_ds)\ntrainer.train()\n"


def _notebook_findings(*cells: str) -> list[str]:
    report = check(notebook(*cells), select=("GPU107",))
    return [f"{d.location.row}:{d.location.column} {d.code}" for d in report.diagnostics]


def test_training_arguments_nothing_reads_in_a_notebook_are_not_reported():
    # a lesson about the Hub shows the settings and trains nothing with them
    assert _notebook_findings(SNIPPET, HUB) == []


def test_training_arguments_a_later_cell_trains_with_stay_reported():
    assert _notebook_findings(SNIPPET, HUB, 'train_ds = [{"input_ids": [1, 2], "labels": 0}] * 10000\n' + TRAIN) == ["3:17 GPU107"]


def test_training_arguments_at_module_level_of_a_script_stay_reported():
    # another module may import them (`from config import training_args`)
    assert findings(SNIPPET, select=("GPU107",)) == ["3:17 GPU107"]


BIG = """\
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from transformers import AutoModelForVision2Seq, AutoProcessor

MODEL_ID = "{checkpoint}"
processor = AutoProcessor.from_pretrained(MODEL_ID)
model = AutoModelForVision2Seq.from_pretrained(MODEL_ID{quantized}).cuda()
dataset = load_dataset("naver-clova-ix/cord-v2", split="train")


def collate(examples):
    return processor(text=[e["text"] for e in examples], images=[e["image"] for e in examples], return_tensors="pt", padding=True)


loader = DataLoader(dataset, batch_size=2, shuffle=True, collate_fn=collate)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
for epoch in range(3):
    for batch in loader:
        batch = {{k: v.to("cuda") for k, v in batch.items()}}
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_pinning_next_to_a_billion_parameter_model_is_not_reported():
    # a few MB a batch next to steps of a 7B model (seconds): pinning saves under 1 %; the per-item image
    # processing in the training process (GPU101) stays
    source = BIG.format(checkpoint="llava-hf/llava-1.5-7b-hf", quantized="")
    assert findings(source, select=("GPU101", "GPU102")) == ["16:10 GPU101"]


def test_pinning_next_to_a_quantized_model_is_not_reported():
    source = BIG.format(checkpoint="org/vision-chat", quantized=", load_in_4bit=True")
    assert findings(source, select=("GPU102",)) == []


def test_pinning_next_to_a_model_under_a_billion_stays_reported():
    for checkpoint in ("google/vit-base-patch16-224", "Qwen/Qwen2.5-VL-0.5B-Instruct", "org/vision-chat"):
        assert findings(BIG.format(checkpoint=checkpoint, quantized=""), select=("GPU102",)) == ["16:10 GPU102"], checkpoint


def test_worker_restarts_next_to_a_billion_parameter_model_are_not_reported():
    # a worker start-up per epoch next to epochs of 7B steps of seconds
    source = BIG.format(checkpoint="llava-hf/llava-1.5-7b-hf", quantized="").replace("collate_fn=collate)", "collate_fn=collate, num_workers=4)")
    assert findings(source, select=("GPU104",)) == []
    small = BIG.format(checkpoint="google/vit-base-patch16-224", quantized="").replace("collate_fn=collate)", "collate_fn=collate, num_workers=4)")
    assert findings(small, select=("GPU104",)) == ["16:10 GPU104"]
