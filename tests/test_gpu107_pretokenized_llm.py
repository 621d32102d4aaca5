"""GPU107 on the LoRA fine-tunes of quantized or billion-parameter LLMs (round 21, the twenty-first corpus).

Both judges called GPU107 noise on notebooks and scripts that fine-tune a 4/8-bit 2.7-47B model with LoRA: rows
tokenized up front with `dataset.map(generate_and_tokenize_prompt)` (a function that builds a prompt and returns
`tokenize(prompt)`, a second function of the notebook that calls the tokenizer), or made in another module, and
padded by `DataCollatorForLanguageModeling`: steps of hundreds of milliseconds, nothing for loader workers to hide
(and on the eighteenth corpus, GPT-J 6B with a dataset that tokenizes 16 texts per batch). Two facts:

- a `.map` whose function reaches the tokenizer through functions of the module tokenizes the rows up front
  (`batch_cost._tokenizes_rows`);
- a module that loads a billion-parameter or 4/8-bit model, handles text only and pads with its collator loads
  each batch in well under 1 % of a step (`trainer_loading._text_for_a_long_step`).

Both judges called right a collator that runs a slow tokenizer on 256 strings per batch for a t5-small step: a
collator that tokenizes, a small model, a stream and TRL packing stay reported.
"""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.trainer_loading import LIGHT, UNKNOWN, trainer_loading_work
from tests.conftest import findings
from tests.projects_helper import lint_written

ONLY = {"select": ("GPU107",)}


def work(source: str) -> list[str]:
    model = SemanticModel(cst.parse_module(textwrap.dedent(source)))
    return [trainer_loading_work(model, a.call) for a in model.frameworks.trainer_arguments]


# A notebook's cells, one after another (`# %%`): the tokenizer is reached through a second function.
NOTEBOOK = """\
# %%
from datasets import load_dataset
train_dataset = load_dataset("gem/viggo", split="train")

# %%
import torch
import transformers
from transformers import AutoTokenizer, AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained({checkpoint})
tokenizer = AutoTokenizer.from_pretrained("gpt2", padding_side="left")

# %%
def tokenize(prompt):
    result = {encode}
    result["labels"] = result["input_ids"].copy()
    return result

# %%
def generate_and_tokenize_prompt(data_point):
    full_prompt = f"Target: {{data_point['target']}}\\nMeaning: {{data_point['meaning_representation']}}"
    return tokenize(full_prompt)

# %%
tokenized_train_dataset = train_dataset.map(generate_and_tokenize_prompt)

# %%
trainer = transformers.Trainer(
    model=model,
    train_dataset=tokenized_train_dataset,
    args=transformers.TrainingArguments(output_dir="out", per_device_train_batch_size=8, max_steps=1000),
    data_collator={collator},
)
trainer.train()
"""
TOKENIZE = 'tokenizer(prompt, truncation=True, max_length=512, padding="max_length")'
PADS = "transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False)"


def test_rows_a_map_tokenizes_through_a_second_function_need_no_workers():
    source = NOTEBOOK.format(checkpoint='"gpt2"', encode=TOKENIZE, collator=PADS)
    assert work(source) == [LIGHT]
    assert findings(source, **ONLY) == []


def test_a_map_whose_functions_only_format_text_stays_reported():
    # the rows stay text; the collator tokenizes them per batch in the training process
    source = NOTEBOOK.format(checkpoint='"gpt2"', encode='{"text": prompt, "input_ids": []}', collator="collate") + textwrap.dedent("""\
        def collate(rows):
            return tokenizer([r["text"] for r in rows], padding=True, return_tensors="pt")
        """)
    assert work(source) == [UNKNOWN]
    assert findings(source, **ONLY) == ["30:10 GPU107"]


# A QLoRA trainer whose rows come from another module's data processor.
QLORA = """\
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

from processors import make_data


class QloraTrainer:
    def __init__(self, config):
        self.config = config

    def load_base_model(self):
        bnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
        self.tokenizer = AutoTokenizer.from_pretrained(self.config["base_model"])
        self.model = AutoModelForCausalLM.from_pretrained(self.config["base_model"]{quantized})

    def train(self):
        data = make_data(self.config, self.tokenizer)
        trainer = transformers.Trainer(
            model=self.model,
            train_dataset=data["train"],
            args=transformers.TrainingArguments(output_dir="out", per_device_train_batch_size=4, max_steps=500),
            data_collator={collator},
        )
        trainer.train()
"""
PADS_SELF = "transformers.DataCollatorForLanguageModeling(self.tokenizer, mlm=False)"


def test_a_quantized_llm_with_a_padding_collator_needs_no_trainer_workers():
    source = QLORA.format(quantized=", quantization_config=bnb_config", collator=PADS_SELF)
    assert work(source) == [LIGHT]
    assert findings(source, **ONLY) == []


def test_a_model_of_unknown_size_with_rows_from_another_module_stays_reported():
    source = QLORA.format(quantized="", collator=PADS_SELF)
    assert work(source) == [UNKNOWN]
    assert findings(source, **ONLY) == ["22:18 GPU107"]


def test_a_quantized_llm_whose_collator_tokenizes_stays_reported():
    # a collator that tokenizes each batch's texts: the judged-right shape, whatever the model
    source = QLORA.format(quantized=", quantization_config=bnb_config", collator="self.collate") + textwrap.dedent("""\

            def collate(self, rows):
                return self.tokenizer([r["text"] for r in rows], padding=True, return_tensors="pt")
        """)
    assert findings(source, **ONLY) == ["22:18 GPU107"]


def test_a_checkpoint_named_in_billions_with_a_per_item_tokenizing_dataset_needs_no_workers():
    source = textwrap.dedent("""\
        from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments, default_data_collator

        tokenizer = AutoTokenizer.from_pretrained("EleutherAI/gpt-j-6B")
        model = AutoModelForCausalLM.from_pretrained("EleutherAI/gpt-j-6B", use_cache=False)


        class Summaries:
            def __init__(self, path):
                self.posts = open(path).read().splitlines()

            def __len__(self):
                return len(self.posts)

            def __getitem__(self, i):
                return tokenizer(self.posts[i], truncation=True, max_length=550, padding="max_length")


        args = TrainingArguments(output_dir="out", per_device_train_batch_size=16, num_train_epochs=1)
        trainer = Trainer(model=model, args=args, train_dataset=Summaries("train.txt"), data_collator=default_data_collator)
        trainer.train()
        """)
    assert work(source) == [LIGHT]
    assert findings(source, **ONLY) == []
    small = source.replace("EleutherAI/gpt-j-6B", "gpt2")
    assert work(small) == [UNKNOWN]
    assert findings(small, **ONLY) == ["18:8 GPU107"]


def test_a_quantized_llm_streaming_its_rows_stays_reported():
    source = NOTEBOOK.format(checkpoint='"meta-llama/Llama-2-7b-hf", load_in_8bit=True', encode=TOKENIZE, collator=PADS)
    streamed = source.replace('split="train")', 'split="train", streaming=True)')
    assert findings(streamed, **ONLY) == ["30:10 GPU107"]


def test_a_quantized_llm_fed_by_another_modules_processor_is_light_across_modules(tmp_path, monkeypatch):
    files = {
        "processors.py": """\
            def make_data(config, tokenizer):
                from datasets import load_dataset
                data = load_dataset("json", data_files=config["data"])
                return data.map(lambda row: tokenizer(row["text"], truncation=True, max_length=512))
            """,
        "trainer.py": QLORA.format(quantized=", quantization_config=bnb_config", collator=PADS_SELF),
    }
    assert lint_written(tmp_path, {k: textwrap.dedent(v) for k, v in files.items()}, monkeypatch) == []
