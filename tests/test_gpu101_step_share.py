"""GPU101 and what a batch costs to load against the step it feeds (round 24, judged on the fourteenth to
twenty-third corpora):

- rows of text for a model of billions of parameters (`loading_cost.text_rows_for_long_steps`): a module of text
  only that loads a 7B checkpoint, with a loader whose collate function only stacks or pads: a batch loads in about a
  millisecond, the step takes hundreds (both judges, twenty-third corpus: "pretokenized-llm", noise);
- a data set whose length the code shows and that makes at most a handful of batches (`small_splits._counted_pass`):
  a pass loads in about what the fix's workers take to start again.

Negatives beside each: a small checkpoint, a module that handles images, a streamed dataset, a collate function
that tokenizes; a data set of many batches and a module of video.
"""

from __future__ import annotations

from tests.conftest import diagnostics, findings

ONLY = {"select": ("GPU101",)}

LONG_STEP = """\
    import torch
    from torch.utils.data import DataLoader, Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, default_data_collator

    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    model = AutoModelForCausalLM.from_pretrained(CHECKPOINT).cuda()


    class Instructions(Dataset):
        def __init__(self, path):
            with open(path) as f:
                self.texts = f.read().split("\\n\\n")

        def __len__(self):
            return len(self.texts)

        def __getitem__(self, i):
            ids = tokenizer(self.texts[i], max_length=512, truncation=True, padding="max_length", return_tensors="pt")
            return {"input_ids": ids["input_ids"][0], "labels": ids["input_ids"][0]}


    loader = DataLoader(Instructions("instructions.txt"), batch_size=4, shuffle=True, collate_fn=COLLATE)
    opt = torch.optim.AdamW(model.parameters())
    for epoch in range(3):
        for batch in loader:
            batch = {k: v.cuda() for k, v in batch.items()}
            loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
"""


def _long_step(checkpoint='"tiiuae/falcon-7b"', collate="default_data_collator"):
    return LONG_STEP.replace("CHECKPOINT", checkpoint).replace("COLLATE", collate)


def test_texts_for_a_seven_billion_parameter_model_are_silent():
    # four texts a batch, a fast tokenizer: about a millisecond against a step of hundreds
    assert findings(_long_step(), **ONLY) == []
    assert findings(_long_step(collate="None"), **ONLY) == []  # the default collate function
    # the model loaded in 8 bits: only worth it for billions of parameters
    quantized = _long_step(checkpoint="path").replace(".from_pretrained(path)", '.from_pretrained(path, load_in_8bit=True)', 1)
    quantized = quantized.replace("AutoModelForCausalLM.from_pretrained(path)", "AutoModelForCausalLM.from_pretrained(path, load_in_8bit=True)")
    assert findings(quantized.replace("    tokenizer = ", '    path = "models/local"\n    tokenizer = '), **ONLY) == []


def test_a_small_checkpoint_keeps_the_finding():
    [d] = diagnostics(_long_step(checkpoint='"gpt2"'), **ONLY)
    assert d.message == "`DataLoader` has no `num_workers`: batches load in the training process"
    assert d.location.row == 22


def test_a_module_that_handles_images_keeps_the_finding():
    source = _long_step().replace("from transformers import", "from PIL import Image\n    from transformers import")
    assert findings(source, **ONLY) == ["23:10 GPU101"]


def test_a_streamed_dataset_keeps_the_finding():
    source = _long_step().replace(
        'loader = DataLoader(Instructions("instructions.txt")',
        'rows = load_dataset("c4", "en", split="train", streaming=True)\n    loader = DataLoader(rows',
    ).replace("import torch\n", "import torch\n    from datasets import load_dataset\n")
    assert findings(source, **ONLY) == ["24:10 GPU101"]


def test_a_collate_function_that_tokenizes_keeps_the_finding():
    source = _long_step(collate="encode").replace(
        "    loader = ",
        "    def encode(rows):\n        return tokenizer([r for r in rows], return_tensors=\"pt\", padding=True)\n\n\n    loader = ",
    )
    assert findings(source, **ONLY) == ["26:10 GPU101"]


FEW_SAMPLES = """\
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Prompts(Dataset):
        def __init__(self, path):
            with open(path) as f:
                self.lines = f.read().splitlines()

        def __len__(self):
            return LENGTH

        def __getitem__(self, i):
            return torch.tensor([ord(c) % 128 for c in self.lines[i % len(self.lines)]])


    loader = DataLoader(DATASET, batch_size=16, shuffle=True, collate_fn=lambda b: torch.nn.utils.rnn.pad_sequence(b))
    model = torch.nn.Embedding(128, 32).cuda()
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(100):
        for x in loader:
            loss = model(x.cuda()).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
"""


def test_a_data_set_of_a_handful_of_batches_is_silent():
    # `__len__` returns 48: three batches of 16 a pass
    assert findings(FEW_SAMPLES.replace("LENGTH", "48").replace("DATASET", 'Prompts("prompts.txt")'), **ONLY) == []
    # samples written out as a list: one batch
    listed = FEW_SAMPLES.replace("DATASET", '[torch.tensor([1, 2]), torch.tensor([3]), torch.tensor([4, 5, 6])]')
    assert findings(listed.replace("LENGTH", "48"), **ONLY) == []


def test_a_data_set_of_many_batches_keeps_the_finding():
    # 4,000 samples: 250 batches a pass
    source = FEW_SAMPLES.replace("LENGTH", "4000").replace("DATASET", 'Prompts("prompts.txt")')
    assert findings(source, **ONLY) == ["17:10 GPU101"]
    # a length the code does not write
    unknown = FEW_SAMPLES.replace("LENGTH", "len(self.lines)").replace("DATASET", 'Prompts("prompts.txt")')
    assert findings(unknown, **ONLY) == ["17:10 GPU101"]


def test_a_handful_of_batches_of_video_keeps_the_finding():
    # a video may take a second to decode: the second batch loads while the first trains
    source = FEW_SAMPLES.replace("LENGTH", "48").replace("DATASET", 'Prompts("video_paths.txt")')
    assert findings(source, **ONLY) == ["17:10 GPU101"]
