"""Data-side noise (issue 13): the batch cost of HF Trainer loaders (GPU107), loaders over a few prompt strings
(GPU101), and `empty_cache()` after a model of one phase is deleted (GPU305). Each silent shape beside the
nearby one that stays reported."""

from __future__ import annotations

import pytest

from tests.conftest import diagnostics, findings

TRAINER = """\
from datasets import load_dataset
from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")


def tokenize(batch):
    return tokenizer(batch["text"], truncation=True)


raw = load_dataset("imdb")
tokenized = raw.map(tokenize, batched=True, remove_columns=["text"])
args = TrainingArguments("out", per_device_train_batch_size=16{settings})
trainer = Trainer(
    model=model,
    args=args,
    train_dataset={train},
    eval_dataset={evaluation},{collator}
)
trainer.train()
"""


def trainer(train='tokenized["train"]', evaluation='tokenized["test"]', collator="\n    data_collator=DataCollatorWithPadding(tokenizer),", settings=""):
    return TRAINER.format(train=train, evaluation=evaluation, collator=collator, settings=settings)


@pytest.mark.parametrize(
    "collator",
    [
        "\n    data_collator=DataCollatorWithPadding(tokenizer),",
        "",  # the Trainer's default pads or stacks
        "\n    data_collator=default_data_collator,",
        "\n    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=True),",
    ],
    ids=["padding", "default", "default-function", "masking"],
)
def test_gpu107_silent_for_a_trainer_on_rows_tokenized_up_front(collator):
    source = trainer(collator=collator).replace("DataCollatorWithPadding,", "DataCollatorWithPadding, DataCollatorForLanguageModeling, default_data_collator,")
    assert findings(source, select=("GPU107",)) == []


def test_gpu107_silent_for_pinning_token_ids_off():
    assert findings(trainer(settings=", dataloader_pin_memory=False"), select=("GPU107",)) == []


def test_gpu107_silent_for_a_chain_loaded_and_mapped_in_one_expression():
    source = trainer(train='load_dataset("imdb", split="train").map(tokenize, batched=True).with_format("torch")', evaluation="None")
    assert findings(source, select=("GPU107",)) == []


def test_gpu107_silent_for_a_lambda_that_hands_the_tokenizer_to_a_helper():
    source = trainer(train='raw["train"].map(lambda ex: encode(ex, tokenizer, 512), batched=True)', evaluation="None")
    assert findings(source, select=("GPU107",)) == []


def short_name(built: str) -> str:
    """The tokenizer under a short name (`t`, as dataflowr's scaling demo writes it), built by `built`."""
    source = trainer().replace('tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")', f"t = {built}")
    source = source.replace("from transformers import AutoTokenizer,", "from transformers import AutoImageProcessor, AutoTokenizer, GPT2TokenizerFast,")
    return source.replace("return tokenizer(", "return t(").replace("DataCollatorWithPadding(tokenizer)", "DataCollatorWithPadding(t)")


def test_gpu107_silent_for_a_tokenizer_known_by_its_class_not_its_name():
    assert findings(short_name('GPT2TokenizerFast.from_pretrained("distilgpt2")'), select=("GPU107",)) == []
    assert findings(short_name('AutoTokenizer.from_pretrained("bert-base-uncased")'), select=("GPU107",)) == []


def test_gpu107_reports_a_short_name_that_is_not_a_tokenizer():
    # `t = AutoImageProcessor...`: the mapped function computes pixel values per row, not token ids.
    assert findings(short_name('AutoImageProcessor.from_pretrained("vit")'), select=("GPU107",)) == ["13:8 GPU107"]


@pytest.mark.parametrize(
    "train, evaluation",
    [('raw["train"]', 'tokenized["test"]'), ('tokenized["train"]', 'raw["test"]')],
    ids=["raw-train", "raw-eval"],
)
def test_gpu107_reports_text_tokenized_per_batch(train, evaluation):
    [d] = diagnostics(trainer(train=train, evaluation=evaluation), select=("GPU107",))
    assert d.location.row == 13
    assert d.message == "`TrainingArguments` leaves `dataloader_num_workers` at its default 0"
    assert d.help.startswith("The HF Trainer loads every batch in the training process")


def test_gpu107_reports_a_collator_that_does_real_work():
    source = trainer(collator="\n    data_collator=lambda rows: processor(images=[r['image'] for r in rows]),")
    assert findings(source, select=("GPU107",)) == ["13:8 GPU107"]


def test_gpu107_reports_arguments_of_a_trainer_it_cannot_follow():
    source = trainer().replace("trainer = Trainer(", "trainer = Trainer(*extra,")
    assert findings(source, select=("GPU107",)) == ["13:8 GPU107"]


def test_gpu107_reports_unpinned_images():
    source = trainer(train='raw["train"]', settings=", dataloader_num_workers=4, dataloader_pin_memory=False")
    [d] = diagnostics(source, select=("GPU107",))
    assert "sets `dataloader_pin_memory=False`" in d.message
    assert d.help.startswith("Every batch is copied to the GPU from pageable memory")


# ---- GPU101: a few prompt strings -------------------------------------------------------------------

PROMPTS = """\
import torch
from torch.utils.data import DataLoader, Dataset


class PromptDataset(Dataset):
    def __init__(self, prompt, num_samples):
        self.prompt = prompt
        self.num_samples = num_samples

    def __len__(self):
        return self.num_samples

    def __getitem__(self, index):
        return {{"prompt": {item}, "index": index}}


def main(args, pipeline):
    pipeline.to("cuda")
    prompts = args.class_prompt.split(",") if args.with_prior_preservation else None
    for i in range(len(prompts)):
        loader = DataLoader(PromptDataset(prompts[i], args.num_class_images), batch_size=4)
        for example in loader:
            pipeline(example["prompt"]).images[0].save(f"{{i}}.png")
"""


def test_gpu101_silent_for_prompt_strings_that_may_be_none():
    assert findings(PROMPTS.format(item="self.prompt"), select=("GPU101",)) == []


def test_gpu101_silent_for_one_prompt_handed_out_whatever_its_source():
    source = PROMPTS.format(item="self.prompt").replace("prompts[i]", "read_concept(i)")
    assert findings(source, select=("GPU101",)) == []


def test_gpu101_reports_items_indexed_out_of_data_it_cannot_follow():
    source = PROMPTS.format(item="self.prompt[index]").replace("prompts[i]", "read_concept(i)")
    assert findings(source, select=("GPU101",)) == ["21:18 GPU101"]


def test_gpu101_reports_prompts_tokenized_per_item():
    source = PROMPTS.format(item="self.tokenizer(self.prompt).input_ids").replace("self.prompt = prompt", "self.prompt, self.tokenizer = prompt, args.tokenizer")
    assert findings(source, select=("GPU101",)) == ["21:18 GPU101"]


# ---- GPU305: a phase's model deleted ----------------------------------------------------------------

SAMPLE = """\
import torch
from diffusers import DiffusionPipeline
from torch.utils.data import DataLoader


def sample(concepts, args):
    for concept in concepts:
        pipeline = DiffusionPipeline.from_pretrained(args.model)
        pipeline.to("cuda")
        for prompts in DataLoader(concept["prompts"], batch_size=4, num_workers=2, pin_memory=True):
            pipeline(prompts).images[0].save("x.png")
        del {deleted}
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
"""

BENCHMARK = """\
import torch


def bench(sizes, x):
    for size in sizes:
        model = torch.nn.Linear(size, size).cuda()
        y = model(x)
        del {deleted}
        torch.cuda.empty_cache()
"""


@pytest.mark.parametrize("source", [SAMPLE.format(deleted="pipeline"), BENCHMARK.format(deleted="model, y")], ids=["concepts", "configurations"])
def test_gpu305_silent_after_a_phase_deletes_its_model(source):
    assert findings(source, select=("GPU305",)) == []


@pytest.mark.parametrize("source, line", [(SAMPLE.format(deleted="prompts"), 14), (BENCHMARK.format(deleted="y"), 9)], ids=["concepts", "configurations"])
def test_gpu305_reports_a_loop_that_deletes_only_tensors(source, line):
    [d] = diagnostics(source, select=("GPU305",))
    assert d.location.row == line and "every evaluation step" in d.message


def test_gpu305_reports_every_training_step_even_after_deleting_a_model():
    source = """\
    import torch


    def train(model, teacher, optimizer, loader):
        for x in loader:
            helper = torch.nn.Linear(4, 4).cuda()
            model(helper(x.cuda())).sum().backward()
            optimizer.step()
            del helper
            torch.cuda.empty_cache()
    """
    [d] = diagnostics(source, select=("GPU305",))
    assert d.message.startswith("`torch.cuda.empty_cache()` every training step (loop at line 5)")
