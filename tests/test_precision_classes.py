"""The noise and wrong-finding classes of the held-out sample (docs/precision.md), as facts of the model:
test code, the cost of a loader's items and the bytes of its batches, loaders read once, collate
functions bound to a device, and `empty_cache()` between phases. Each with the shape that stays silent
and the nearby shape that is still reported."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.config import ConfigError, settings_from_table
from tests.conftest import REPO, diagnostics, findings

LOOP = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def train(model, optimizer, dataset):
    loader = DataLoader(dataset, batch_size=4, shuffle=True)
    for x in loader:
        loss = model(x.to(device)).sum()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""
LOOP_FINDINGS = ["8:14 GPU101", "8:14 GPU102", "8:14 GPU103", "13:15 GPU303"]


# ---- test code --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["tests/test_loader.py", "test_loader.py", "pkg/tests/helpers.py", "loader_test.py",
                                  "conftest.py", "test/train_smoke.py", "src/pkg/tests/training/lora_tp.py"])  # fmt: skip
def test_performance_rules_skip_test_files(path):
    assert findings(LOOP, path=path) == []


@pytest.mark.parametrize("path", ["train.py", "testing_utils.py", "contest/train.py", "latest/train.py", "tests.py"])
def test_files_that_only_look_like_tests_are_checked(path):
    assert findings(LOOP, path=path) == LOOP_FINDINGS


SCRIPT = """\
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
device = torch.device("cuda")


def train(model, optimizer, X, Y):
    for i in range(0, X.size(0), 32):
        loss = (model(X[i:i + 32].to(device, non_blocking=True)) - Y[i:i + 32].to(device, non_blocking=True)).pow(2).mean()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


@pytest.mark.parametrize("path", ["TCN/copy_memory/copymem_test.py", "test_lm.py"])
def test_a_script_named_like_a_test_that_parses_its_command_line_is_checked(path):
    # TCN's `*_test.py` training scripts: importing them reads sys.argv, so no test runner collects them
    assert findings(SCRIPT, path=path) == ["16:15 GPU303"]


@pytest.mark.parametrize("path", ["copymem_test.py", "tests/test_train.py"])
@pytest.mark.parametrize("change", [
    lambda s: s.replace("args = parser.parse_args()", "def main():\n    args = parser.parse_args()"),  # parsed only when run
    lambda s: "import pytest\n" + s,
    lambda s: "import unittest\n" + s,
    lambda s: s.replace("args = parser.parse_args()", "args = parser.parse_args([])"),  # fixed arguments: importable
])  # fmt: skip
def test_test_files_that_parse_no_command_line_at_import_stay_tests(path, change):
    assert findings(change(SCRIPT), path=path) == []


def test_an_explicit_test_paths_setting_is_kept_for_scripts_too():
    assert findings(SCRIPT, path="qa/run_check.py", test_paths=("qa/**",)) == []


def test_a_module_that_imports_pytest_is_test_code_wherever_it_lives():
    assert findings("import pytest\n" + LOOP, path="tools/check_loader.py") == []


def test_a_testcase_class_is_test_code_and_the_rest_of_its_module_is_not():
    source = LOOP + textwrap.dedent("""\


        class TestTrain(unittest.TestCase):
            def test_step(self):
                for x in DataLoader(data, batch_size=2, shuffle=True):
                    model(x.to(device)).sum().backward()
                    optimizer.step()
                    print(x.sum().item())
        """)
    assert findings("import unittest\n" + source) == [f"{int(r) + 1}:{rest}" for r, rest in (f.split(":", 1) for f in LOOP_FINDINGS)]


def test_correctness_and_api_rules_still_run_on_tests():
    source = """\
        import torch

        for x in loader:
            y = model(x.cuda())
            host = y.to("cpu", non_blocking=True)
            print(host.sum())
            torch.cuda.memory_cached()
            with torch.cuda.amp.autocast():
                pass
        """
    codes = [f.split()[1] for f in findings(source, path="tests/test_copy.py")]
    assert codes == ["GPU205", "GPU402", "GPU403"]


def test_test_paths_setting_decides_which_files_are_tests():
    assert findings(LOOP, path="tests/test_loader.py", test_paths=()) == LOOP_FINDINGS
    assert findings(LOOP, path="qa/train_check.py", test_paths=("qa/**",)) == []
    assert findings(LOOP, path="tests/test_loader.py", test_paths=("qa/**",)) == LOOP_FINDINGS


def test_test_paths_in_pyproject():
    settings = settings_from_table({"test-paths": ["qa/**"]}, REPO)
    assert settings.test_paths == ("qa/**",)
    assert settings.is_test_path(str(REPO / "qa" / "smoke.py")) and not settings.is_test_path(str(REPO / "tests" / "x.py"))
    with pytest.raises(ConfigError, match="`test-paths` must be a list of strings"):
        settings_from_table({"test-paths": "tests/**"}, REPO)


def test_a_changed_test_paths_setting_invalidates_the_cache():
    default = settings_from_table({}, REPO)
    assert settings_from_table({"test-paths": list(default.test_paths)}, REPO).fingerprint() == default.fingerprint()
    assert settings_from_table({"test-paths": ["qa/**"]}, REPO).fingerprint() != default.fingerprint()


def test_a_noqa_for_a_rule_that_skips_tests_is_not_reported_unused_there():
    source = "import pytest\nimport torch\nloader = DataLoader(ds)  # noqa: GPU101\n"
    assert findings(source, path="tools/check.py", select=("GPU001",)) == []


# ---- what an item costs (GPU101) --------------------------------------------------------------------

DATASET = """\
import torch
from torch.utils.data import DataLoader, Dataset
{imports}
device = torch.device("cuda")


{dataset}


def train(model, optimizer, loader):
    for x, y in loader:
        loss = model(x.to(device)).sum()
        loss.backward()
        optimizer.step()


def main(tokenizer, texts, labels):
    loader = DataLoader({construct}, batch_size=32, shuffle=True)
    train(model, optimizer, loader)
"""


def loader_source(dataset: str, construct: str, imports: str = "") -> str:
    return DATASET.format(dataset=textwrap.dedent(dataset).strip(), construct=construct, imports=imports)


def at_loader(source: str, code: str) -> str:
    """`row:col CODE` of a finding on the `DataLoader(...)` call in `main`."""
    row = source.splitlines().index(next(line for line in source.splitlines() if "loader = DataLoader(" in line)) + 1
    return f"{row}:14 {code}"


PRE_TOKENIZED = """\
    class Encoded(Dataset):
        def __init__(self, texts, labels, tokenizer):
            self.ids = [tokenizer.encode(t) for t in texts]
            self.labels = labels

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, index):
            return torch.tensor(self.ids[index], dtype=torch.long), torch.tensor(self.labels[index])
    """


def test_gpu101_silent_for_pre_tokenized_data_indexed_in_memory():
    source = loader_source(PRE_TOKENIZED, "Encoded(texts, [int(x) for x in labels], tokenizer)")
    assert findings(source, select=("GPU101",)) == []


@pytest.mark.parametrize(
    "getitem",
    [
        "return self.tokenizer(self.texts[index], return_tensors='pt')['input_ids'][0], self.labels[index]",
        "return self.transform(Image.open(self.texts[index])), self.labels[index]",
        "return torch.load(self.texts[index]), self.labels[index]",
        "x = self.data[index]\nreturn (x - x.mean()) / x.std(), self.labels[index]",
        "return super().__getitem__(index)",
    ],
    ids=["tokenizes", "decodes", "reads-a-file", "normalises", "inherited"],
)
def test_gpu101_reports_real_work_in_getitem(getitem):
    dataset = f"""\
        class Work(Dataset):
            def __init__(self, texts, labels, tokenizer, transform=None):
                self.texts, self.labels, self.tokenizer, self.transform = texts, labels, tokenizer, transform
                self.data = torch.randn(10, 4)

            def __getitem__(self, index):
                {textwrap.indent(getitem, " " * 16).lstrip()}
        """
    source = loader_source(dataset, "Work(texts, labels, tokenizer)", "from PIL import Image")
    [d] = diagnostics(source, select=("GPU101",))
    assert d.message == "`DataLoader` has no `num_workers`: batches load in the training process"
    assert d.help == "The GPU waits while the training process loads each batch"


def test_gpu101_reports_a_dataset_it_cannot_follow():
    source = loader_source("", "load_my_dataset(texts)")
    assert findings(source, select=("GPU101",)) == [at_loader(source, "GPU101")]


@pytest.mark.parametrize(
    "construct",
    ["TensorDataset(torch.randn(64, 4), torch.zeros(64))", "[torch.randn(4) for _ in range(64)]", "make_tensors()"],
    ids=["tensor-dataset", "list-of-tensors", "returned-by-a-function"],
)
def test_gpu101_silent_for_in_memory_tensors(construct):
    dataset = """\
        def make_tensors():
            data = TensorDataset(torch.randn(64, 4), torch.zeros(64))
            return data
        """
    source = loader_source(dataset, construct, "from torch.utils.data import TensorDataset")
    assert findings(source, select=("GPU101",)) == []


def test_gpu101_a_tokenizing_collate_function_is_real_work():
    source = loader_source(PRE_TOKENIZED, "Encoded(texts, [int(x) for x in labels], tokenizer), collate_fn=lambda b: tokenizer(b, padding=True)")
    assert findings(source, select=("GPU101",)) == [at_loader(source, "GPU101")]


def test_gpu101_padding_token_ids_is_no_work_for_workers():
    # What `DataCollatorWithPadding` does: pad ids that are already tokens.
    source = loader_source(PRE_TOKENIZED, "Encoded(texts, [int(x) for x in labels], tokenizer), collate_fn=lambda b: tokenizer.pad(b)")
    assert findings(source, select=("GPU101",)) == []


HF_TOKENIZED = """import torch
from datasets import load_dataset
from torch.utils.data import DataLoader

device = torch.device("cuda")


def main(model, optimizer, tokenizer):
    raw = load_dataset("glue", "mrpc"{streaming})

    def tokenize_function(examples):
        return tokenizer(examples["sentence1"], examples["sentence2"], truncation=True)

    tokenized = raw.map(tokenize_function, batched=True).rename_column("label", "labels")
    tokenized = tokenized.{format}

    def collate_fn(examples):
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    loader = DataLoader(tokenized["train"], shuffle=True, collate_fn=collate_fn, batch_size=32)
    for batch in loader:
        model(**{{k: v.to(device) for k, v in batch.items()}}).loss.backward()
        optimizer.step()
"""


def test_gpu101_silent_for_a_split_of_a_dataset_tokenized_by_map():
    source = HF_TOKENIZED.format(streaming="", format='with_format("torch")')
    assert findings(source, select=("GPU101", "GPU102")) == []


@pytest.mark.parametrize(
    ("streaming", "format"),
    [(", streaming=True", 'with_format("torch")'), ("", "with_transform(augment)")],
    ids=["streamed-so-map-runs-per-item", "a-transform-runs-per-item"],
)
def test_gpu101_reports_a_tokenized_dataset_whose_work_runs_per_item(streaming, format):
    source = HF_TOKENIZED.format(streaming=streaming, format=format)
    assert [f.split()[1] for f in findings(source, select=("GPU101",))] == ["GPU101"]


def test_gpu101_reports_a_datapipe_that_tokenizes_per_item():
    source = HF_TOKENIZED.format(streaming="", format='with_format("torch")').replace(
        'raw = load_dataset("glue", "mrpc")', "raw = IterableWrapper(read_rows())"
    ).replace("from datasets import load_dataset", "from torchdata.datapipes.iter import IterableWrapper")
    assert [f.split()[1] for f in findings(source, select=("GPU101",))] == ["GPU101"]


def test_gpu101_silent_for_a_tensor_dataset_passed_through_a_parameter():
    # transformers' legacy run_glue: `train(args, train_dataset, ...)` with a TensorDataset of features
    source = """\
        import torch
        from torch.utils.data import DataLoader, RandomSampler, TensorDataset

        def load_and_cache_examples(args, tokenizer):
            features = convert_examples_to_features(read_examples(args.data_dir), tokenizer, max_length=128)
            all_input_ids = torch.tensor([f.input_ids for f in features], dtype=torch.long)
            all_labels = torch.tensor([f.label for f in features], dtype=torch.long)
            return TensorDataset(all_input_ids, all_labels)

        def train(args, train_dataset, model):
            loader = DataLoader(train_dataset, sampler=RandomSampler(train_dataset), batch_size=args.batch_size)
            for batch in loader:
                batch = tuple(t.to(args.device) for t in batch)
                model(batch[0]).loss.backward()
                optimizer.step()

        def main(args, tokenizer, model):
            train_dataset = load_and_cache_examples(args, tokenizer)
            train(args, train_dataset, model)
        """
    assert findings(source, select=("GPU101", "GPU102")) == []


# ---- the bytes of a batch (GPU102) ------------------------------------------------------------------


def test_gpu102_silent_for_token_ids():
    source = loader_source(PRE_TOKENIZED, "Encoded(texts, labels, tokenizer), num_workers=2")
    assert findings(source, select=("GPU102",)) == []


def test_gpu102_reports_images_even_beside_a_tokenizer():
    dataset = """\
        class Captions(Dataset):
            def __init__(self, paths, captions, tokenizer):
                self.images = [Image.open(p) for p in paths]
                self.ids = [tokenizer.encode(c) for c in captions]

            def __getitem__(self, index):
                return torch.as_tensor(self.images[index]), torch.tensor(self.ids[index])
        """
    source = loader_source(dataset, "Captions(texts, labels, tokenizer), num_workers=2", "from PIL import Image")
    [d] = diagnostics(source, select=("GPU102",))
    assert d.message.startswith("`DataLoader` has no `pin_memory` but its batches are copied to the GPU (`x.to(device)` at line 18)")
    assert f"{d.location.row}:{d.location.column} GPU102" == at_loader(source, "GPU102")


def test_a_dataset_class_given_a_size_is_not_toy_data():
    dataset = """\
        class RandomImages(Dataset):
            def __init__(self, size):
                self.images = torch.randn(size, 3, 32, 32)

            def __getitem__(self, index):
                return self.images[index], 0
        """
    source = loader_source(dataset, "RandomImages(1024), num_workers=2")
    assert findings(source, select=("GPU102", "GPU103")) == [at_loader(source, "GPU102")]


def test_gpu102_reports_data_of_unknown_size():
    source = loader_source("", "TensorDataset(torch.load('features.pt'), torch.zeros(64)), num_workers=2",
                           "from torch.utils.data import TensorDataset")  # fmt: skip
    assert findings(source, select=("GPU102",)) == [at_loader(source, "GPU102")]


# ---- toy data (GPU101, GPU102, GPU103) --------------------------------------------------------------

TOY = """\
    class ToyDataset(Dataset):
        def __init__(self, X, y):
            self.features = X
            self.labels = y

        def __getitem__(self, index):
            return self.features[index], self.labels[index]

        def __len__(self):
            return self.labels.shape[0]


    X_train = torch.tensor([[-1.2, 3.1], [-0.9, 2.9], [-0.5, 2.6], [2.3, -1.1], [2.7, -1.5]])
    y_train = torch.tensor([0, 0, 0, 1, 1])
    """


def test_toy_data_written_in_the_code_gets_no_loader_advice():
    source = loader_source(TOY, "ToyDataset(X_train, y_train)").replace("batch_size=32", "batch_size=2")
    assert findings(source, select=("GPU1",)) == []


def test_synthetic_data_of_any_size_is_not_toy_data():
    source = loader_source(TOY, "ToyDataset(torch.randn(1000, 2), torch.zeros(1000))").replace("batch_size=32", "batch_size=2")
    # GPU102 is silent for another reason: rows held in memory and no workers, so pinning would run in the
    # training process (tests/test_data_loading_gpu102.py).
    assert [f.split()[1] for f in findings(source, select=("GPU1",))] == ["GPU103"]


# ---- loaders read once (GPU101, GPU103) ------------------------------------------------------------

ONCE = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def calibrate(model, dataset):
    loader = DataLoader(dataset, batch_size=2, shuffle=True)
{read}
"""


@pytest.mark.parametrize(
    "read",
    ["    batch = next(iter(loader))\n    model(batch.to(device)).sum().backward()\n",
     "    for batch in loader:\n        model(batch.to(device)).sum().backward()\n        optimizer.step()\n        break\n"],
    ids=["next-iter", "loop-that-breaks"],
)  # fmt: skip
def test_a_loader_read_for_one_batch_gets_no_worker_or_batch_size_advice(read):
    assert [f.split()[1] for f in findings(ONCE.format(read=read), select=("GPU101", "GPU103"))] == []


def test_a_loader_read_once_per_epoch_still_counts():
    read = "    for epoch in range(10):\n        batch = next(iter(loader))\n        model(batch.to(device)).sum().backward()\n        optimizer.step()\n"
    assert [f.split()[1] for f in findings(ONCE.format(read=read), select=("GPU101",))] == ["GPU101"]


def test_a_loop_that_breaks_only_sometimes_is_not_one_batch():
    read = "    for i, batch in enumerate(loader):\n        model(batch.to(device)).sum().backward()\n        optimizer.step()\n        if i == 100:\n            break\n"
    assert [f.split()[1] for f in findings(ONCE.format(read=read), select=("GPU101", "GPU103"))] == ["GPU101", "GPU103"]


# ---- collate functions that move batches to the GPU (GPU101, GPU102) ---------------------------------

COLLATE = """\
import functools
import torch
from torch.utils.data import DataLoader
from mypkg.data import collate, make_collate

device = torch.device("cuda")


def pad_and_move(batch, device):
    return torch.stack(batch).to(device)


def train(model, optimizer, dataset):
    loader = DataLoader(dataset, batch_size=32, shuffle=True, collate_fn={collate})
    for x in loader:
        model(x).sum().backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    "collate",
    ["functools.partial(collate, device=device)", "functools.partial(pad_and_move, device=device)",
     "lambda b: collate(b, device)", "make_collate(device)", "moving"],
)  # fmt: skip
def test_gpu101_silent_when_the_collate_function_moves_to_the_gpu(collate):
    source = COLLATE.format(collate=collate).replace("def train(", "moving = functools.partial(collate, device=device)\n\n\ndef train(")
    assert findings(source, select=("GPU101", "GPU102")) == []


def test_gpu101_reports_a_collate_function_bound_to_the_cpu():
    source = COLLATE.format(collate='functools.partial(collate, device="cpu")')
    assert findings(source, select=("GPU101",)) == ["14:14 GPU101"]


def test_a_dataset_of_gpu_tensors_appended_to_a_list_produces_cuda_batches():
    source = loader_source(
        """\
        class Pairs(Dataset):
            def __init__(self, X, y):
                self.X, self.y = X, y

            def __getitem__(self, index):
                return self.X[index], self.y[index]

        def build(texts, tokenizer):
            x = []
            for t in texts:
                x.append(torch.tensor(tokenizer.encode(t), device=device))
            return x
        """,
        "Pairs(build(texts, tokenizer), labels)",
    )
    assert findings(source, select=("GPU101", "GPU102")) == []


# ---- GPU305: empty_cache between phases --------------------------------------------------------------

PHASES = """\
import gc
import torch

device = torch.device("cuda")


def train(model, optimizer, loader, args):
    for epoch in range(args.epochs):
        for step, x in enumerate(loader):
            model(x.to(device)).sum().backward()
            optimizer.step()
{in_step}
{in_epoch}
"""


def phases(in_step: str = "", in_epoch: str = "") -> str:
    return PHASES.format(in_step=textwrap.indent(textwrap.dedent(in_step), " " * 12), in_epoch=textwrap.indent(textwrap.dedent(in_epoch), " " * 8))


@pytest.mark.parametrize(
    "source",
    [
        phases("if step % args.validation_steps == 0:\n    pipeline = make_pipeline(model)\n    log_validation(pipeline)\n    del pipeline\n    torch.cuda.empty_cache()\n"),
        phases("if step % args.validation_steps == 0:\n    log_validation(model)\n    gc.collect()\n    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n"),
        phases(in_epoch="pipeline = make_pipeline(model)\nlog_validation(pipeline)\ndel pipeline\ntorch.cuda.empty_cache()\n"),
        phases(in_epoch="torch.cuda.empty_cache()\n"),
        phases("if args.cuda and get_num_updates() == 0:\n    torch.cuda.empty_cache()\n"),
    ],
    ids=["del-at-interval", "gc-at-interval", "del-per-epoch", "per-epoch", "first-update-only"],
)
def test_gpu305_silent_between_phases(source):
    assert findings(source, select=("GPU305",)) == []


def test_gpu305_after_an_error_flag_is_recovery():
    source = phases("oom = False\ntry:\n    model(x.to(device))\nexcept RuntimeError:\n    oom = True\nif oom:\n    torch.cuda.empty_cache()\n")
    assert findings(source, select=("GPU305",)) == []


def test_gpu305_every_step_after_del_is_still_every_step():
    [d] = diagnostics(phases("del x\ntorch.cuda.empty_cache()\n"), select=("GPU305",))
    assert d.severity.value == "warning"
    assert d.message.startswith("`torch.cuda.empty_cache()` every training step (loop at line 9)")


def test_gpu305_at_an_interval_without_freeing_is_info_and_not_every_step():
    [d] = diagnostics(phases("if step % 100 == 0:\n    torch.cuda.empty_cache()\n"), select=("GPU305",))
    assert d.severity.value == "info" and "every" not in d.message


def test_settings_named_after_optimal_values_are_not_optimizers():
    # TensorRT export loops pass `opt_batch_size` / `opt_image_height`: not a training step.
    source = """\
        import torch

        for name, obj in models.items():
            model = obj.get_model()
            inputs = obj.get_sample_input(opt_batch_size, opt_image_height)
            torch.onnx.export(model.cuda(), inputs, name)
            del model
            torch.cuda.empty_cache()
        """
    assert findings(source, select=("GPU305",)) == []


def test_the_readme_names_the_rules_that_run_on_test_code():
    from gpulint.checks import all_rules

    text = (REPO / "README.md").read_text(encoding="utf-8")
    sentence = text.split("Test code is not training code", 1)[1].split("\n\n", 1)[0]
    named = sentence.split("rules run (", 1)[1].split(")", 1)[0]
    assert named.split(", ") == sorted(code for code, rule in all_rules().items() if rule.applies_to_tests)
