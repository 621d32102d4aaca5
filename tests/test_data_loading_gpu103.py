"""GPU103 small-batch-size."""

from __future__ import annotations

import json
import textwrap

import pytest

from gpulint.diagnostics import Applicability, Severity
from tests.conftest import diagnostics, findings, fixed, run_gpulint

ONLY = {"select": ("GPU103",)}

TRAIN_LOOP = """
for x, y in loader:
    optimizer.zero_grad()
    loss_fn(model(x.to(device)), y.to(device)).backward()
    optimizer.step()
"""


def script(loader_line: str, before: str = "", loop: str = TRAIN_LOOP) -> str:
    return (
        "import argparse\nimport torch\nfrom torch.utils.data import DataLoader\n\n"
        'device = torch.device("cuda")\n' + before + loader_line + "\n" + loop
    )


def test_missing_batch_size_is_batch_one():
    source = script("loader = DataLoader(ds, shuffle=True, num_workers=4)")
    assert findings(source, **ONLY) == ["6:10 GPU103"]
    [d] = diagnostics(source, **ONLY)
    assert d.severity == Severity.WARNING
    assert "no `batch_size`, so every batch is a single sample" in d.message
    assert d.fix.applicability == Applicability.UNSAFE
    assert "DataLoader(ds, shuffle=True, num_workers=4, batch_size=64)" in fixed(source, **ONLY)


def test_literal_below_the_threshold():
    source = script("loader = DataLoader(ds, batch_size=4, shuffle=True)")
    [d] = diagnostics(source, **ONLY)
    assert d.message == "`DataLoader` uses `batch_size=4`, below 16"
    assert "DataLoader(ds, batch_size=64, shuffle=True)" in fixed(source, **ONLY)
    assert fixed(source, unsafe=False, **ONLY) == source


def test_positional_batch_size_and_module_constant():
    source = script("loader = DataLoader(ds, BATCH, True)", before="BATCH = 8\n")
    [d] = diagnostics(source, **ONLY)
    assert "`batch_size=8` (module constant at train.py:6)" in d.message
    assert "BATCH = 64\n" in fixed(source, **ONLY)


def test_function_default():
    source = script(
        "def make(ds, batch_size=2):\n    return DataLoader(ds, batch_size=batch_size, shuffle=True)\n\nloader = make(ds)"
    )
    [d] = diagnostics(source, **ONLY)
    assert "(function default at train.py:6)" in d.message
    assert "def make(ds, batch_size=64):" in fixed(source, **ONLY)


@pytest.mark.parametrize(
    "option",
    [
        'parser.add_argument("--batch-size", type=int, default=8)',
        'parser.add_argument("--batch_size", type=int, default=8)',
        'parser.add_argument("-b", "--bs", dest="batch_size", type=int, default=8)',
    ],
)
def test_argparse_spellings(option):
    source = script(
        "loader = DataLoader(ds, batch_size=args.batch_size, shuffle=True)",
        before=f"parser = argparse.ArgumentParser()\n{option}\nargs = parser.parse_args()\n",
    )
    [d] = diagnostics(source, **ONLY)
    assert "`batch_size=8` (argparse default at train.py:7)" in d.message
    assert option.replace("default=8", "default=64") in fixed(source, **ONLY)


def test_learning_rate_advice_follows_the_optimizer():
    sgd = script("loader = DataLoader(ds, batch_size=4, shuffle=True)", before="optimizer = torch.optim.SGD(params, lr=0.1)\n")
    adam = script("loader = DataLoader(ds, batch_size=4, shuffle=True)", before="optimizer = torch.optim.AdamW(params)\n")
    unknown = script("loader = DataLoader(ds, batch_size=4, shuffle=True)")
    assert "linearly with it (SGD, with warm-up)" in diagnostics(sgd, **ONLY)[0].help
    assert "square root of the factor (Adam)" in diagnostics(adam, **ONLY)[0].help
    assert "(linearly for SGD, by the square root for Adam)" in diagnostics(unknown, **ONLY)[0].help


def test_options_threshold_and_target():
    source = script("loader = DataLoader(ds, batch_size=24, shuffle=True)")
    assert findings(source, **ONLY) == []
    options = {"rule_options": (("GPU103", (("min-batch-size", 32), ("target-batch-size", 128))),)}
    assert findings(source, **ONLY, **options) == ["6:10 GPU103"]
    assert "batch_size=128" in fixed(source, **ONLY, **options)


def test_eval_loaders_only_with_the_option_and_as_info():
    source = script(
        "loader = DataLoader(ds, batch_size=4)",
        loop="with torch.no_grad():\n    for x in loader:\n        model(x.to(device))\n",
    )
    assert findings(source, **ONLY) == []
    options = {"rule_options": (("GPU103", (("check-eval-loaders", True),)),)}
    [d] = diagnostics(source, **ONLY, **options)
    assert d.severity == Severity.INFO


def test_fix_is_idempotent():
    source = script("loader = DataLoader(ds, batch_size=4, shuffle=True)")
    once = fixed(source, **ONLY)
    assert fixed(once, **ONLY) == once and findings(once, **ONLY) == []


def test_argparse_default_through_the_real_cli(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(
        textwrap.dedent("""\
            import argparse

            import torch
            from torch.utils.data import DataLoader

            parser = argparse.ArgumentParser()
            parser.add_argument("--batch-size", type=int, default=8)
            parser.add_argument("--lr", type=float, default=0.1)


            def main(args):
                device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
                for x, y in loader:
                    optimizer.zero_grad()
                    loss_fn(model(x.to(device)), y.to(device)).backward()
                    optimizer.step()


            if __name__ == "__main__":
                main(parser.parse_args())
        """),
        encoding="utf-8",
    )
    checked = run_gpulint("check", "--select", "GPU103", "--output-format", "json", str(path))
    [finding] = json.loads(checked.stdout)
    assert (finding["location"]["row"], finding["location"]["column"]) == (13, 14)
    assert f"argparse default at {path}:7" in finding["message"]
    result = run_gpulint("fix", "--apply", "--unsafe-fixes", "--select", "GPU103", str(path))
    assert result.returncode == 0, result.stderr
    text = path.read_text(encoding="utf-8")
    assert 'parser.add_argument("--batch-size", type=int, default=64)' in text
    assert "batch_size=args.batch_size" in text


# ---- no finding expected ---------------------------------------------------------------------------


def test_batch_sampler_or_batching_disabled():
    assert findings(script("loader = DataLoader(ds, batch_sampler=sampler)"), **ONLY) == []
    assert findings(script("loader = DataLoader(ds, batch_size=None, shuffle=True)"), **ONLY) == []


def test_unknown_batch_size():
    assert findings(script("loader = DataLoader(ds, batch_size=cfg.batch_size, shuffle=True)"), **ONLY) == []
    assert findings(script("loader = DataLoader(ds, batch_size=args.batch_size // world, shuffle=True)"), **ONLY) == []
    assert findings(script("loader = DataLoader(ds, **kwargs)"), **ONLY) == []


def test_gradient_accumulation_in_the_loop():
    loop = """
for step, (x, y) in enumerate(loader):
    loss = loss_fn(model(x.to(device)), y.to(device)) / args.gradient_accumulation_steps
    loss.backward()
    if (step + 1) % args.gradient_accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    assert findings(script("loader = DataLoader(ds, batch_size=2, shuffle=True)", loop=loop), **ONLY) == []


def test_accelerate_accumulate_context():
    loop = """
for x in loader:
    with accelerator.accumulate(model):
        accelerator.backward(model(x).loss)
        optimizer.step()
"""
    assert findings(script("loader = DataLoader(ds, batch_size=2, shuffle=True)", loop=loop), **ONLY) == []


def test_pretrained_large_model_fine_tuning():
    source = script(
        "loader = DataLoader(ds, batch_size=4, shuffle=True)",
        before="model = AutoModelForCausalLM.from_pretrained(name).to(device)\n",
    )
    assert findings(source, **ONLY) == []


def test_detection_collate_keeps_lists():
    assert findings(script("loader = DataLoader(ds, batch_size=2, shuffle=True, collate_fn=lambda b: tuple(zip(*b)))"), **ONLY) == []
    source = script(
        "loader = DataLoader(ds, batch_size=2, shuffle=True, collate_fn=collate)",
        before="def collate(batch):\n    return tuple(zip(*batch))\n",
    )
    assert findings(source, **ONLY) == []


def test_iterable_dataset_without_batch_size():
    source = script(
        "loader = DataLoader(Stream(), shuffle=False)",
        before="class Stream(torch.utils.data.IterableDataset):\n    def __iter__(self):\n        yield from batches\n",
    )
    assert findings(source, **ONLY) == []


def test_eval_loader_by_default():
    loop = "model.eval()\nfor x in loader:\n    model(x.to(device))\n"
    assert findings(script("loader = DataLoader(ds, batch_size=1)", loop=loop), **ONLY) == []


def test_unit_test_files():
    source = script("loader = DataLoader(ds, batch_size=2, shuffle=True)")
    assert findings(source, path="tests/test_training.py", **ONLY) == []
    assert findings(source, path="model_test.py", **ONLY) == []


def test_large_enough_and_no_training_evidence():
    assert findings(script("loader = DataLoader(ds, batch_size=16, shuffle=True)"), **ONLY) == []
    assert findings(script("loader = DataLoader(ds, batch_size=4)", loop="for x in loader:\n    predict(x)\n"), **ONLY) == []


def test_shuffled_evaluation_loop_that_does_not_train():
    # Beam-search evaluation needs batch size 1 (a-PyTorch-Tutorial-to-Image-Captioning, eval.py).
    loop = """
def evaluate(beam_size):
    for i, (image, caps) in enumerate(tqdm(loader)):
        image = image.to(device)
        encoder_out = encoder(image)
"""
    source = script("loader = DataLoader(ds, batch_size=1, shuffle=True, num_workers=1, pin_memory=True)", loop=loop)
    assert findings(source, **ONLY) == []


def test_collate_fn_defined_elsewhere():
    # Detection references: `collate_fn=utils.collate_fn` / `dataset.collate_fn` keep images as lists.
    for collate in ("utils.collate_fn", "train_dataset.collate_fn", "list_data_collate"):
        source = script(f"loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn={collate})")
        assert findings(source, **ONLY) == [], collate
    source = script(
        "loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=default_collate)",
        before="from torch.utils.data import default_collate\n",
    )
    assert findings(source, **ONLY) == ["7:10 GPU103"]


def test_volumetric_and_whole_slide_medical_imaging():
    # One sample is a 3D volume or a bag of tiles (MONAI MIL: batch 4 x 44 tiles).
    assert findings(script("loader = DataLoader(ds, batch_size=2, shuffle=True)", before="import monai\n"), **ONLY) == []
    assert findings(
        script("loader = DataLoader(ds, batch_size=2, shuffle=True)", before="net = torch.nn.Conv3d(1, 8, 3)\n"), **ONLY
    ) == []


# ---- what one sample costs, and how many there are --------------------------------------------------

FIELDS_LOOP = """
for epoch in range(10):
    for batch in loader:
        optimizer.zero_grad()
        x = batch["input_fields"].to(device)
        x = torch.permute(x, {axes})
        x = torch.flatten(x, start_dim=1, end_dim=2)
        loss_fn(model(x), batch["output_fields"].to(device)).backward()
        optimizer.step()
"""


def test_a_batch_of_space_time_fields_is_small_by_memory():
    # A neural operator's reference setup: each sample is (time, x, y, fields), arranged into five axes.
    source = script("loader = DataLoader(ds, batch_size=4, shuffle=True)", loop=FIELDS_LOOP.format(axes="(0, 1, 4, 2, 3)"))
    assert findings(source, **ONLY) == []
    video = script("loader = DataLoader(ds, batch_size=4, shuffle=True)", loop=FIELDS_LOOP.format(axes="(0, 1, 4, 2, 3)").replace(
        "torch.permute(x, (0, 1, 4, 2, 3))", "x.view(x.shape[0], 16, 3, 112, 112)"))
    assert findings(video, **ONLY) == []


def test_a_batch_of_images_arranged_with_four_axes_stays_reported():
    source = script("loader = DataLoader(ds, batch_size=4, shuffle=True)", loop=FIELDS_LOOP.format(axes="(0, 3, 1, 2)"))
    assert findings(source, **ONLY) == ["6:10 GPU103"]


def test_a_dataset_that_fits_in_one_batch():
    # A toy seq2seq truncated to its first ten samples: batch 10 is the whole dataset.
    before = "X_morse = X[indices[:TRUNCATE]]\ny_morse = y[indices[:TRUNCATE]]\n"
    loader = "loader = DataLoader(TensorDataset(X_morse, y_morse), batch_size=BATCH_SIZE, shuffle=True)"
    source = script(loader, before="from torch.utils.data import TensorDataset\nTRUNCATE = 10\nBATCH_SIZE = 10\n" + before)
    assert findings(source, **ONLY) == []
    assert findings(source.replace("TRUNCATE = 10", "TRUNCATE = 1000"), **ONLY) == ["11:10 GPU103"]
    sliced = script("loader = DataLoader(TensorDataset(X[:8], y[:8]), batch_size=8, shuffle=True)", before="from torch.utils.data import TensorDataset\n")
    assert findings(sliced, **ONLY) == []
    unknown = script("loader = DataLoader(TensorDataset(X[idx], y[idx]), batch_size=8, shuffle=True)", before="from torch.utils.data import TensorDataset\n")
    assert findings(unknown, **ONLY) == ["7:10 GPU103"]


TASK = """\
    import argparse

    import torch
    from torchvision import datasets, models, transforms


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--batch-size", type=int, default=4)
        parser.add_argument("--epochs", type=int, default=25)
        args = parser.parse_args()
        device = torch.device("cuda:0")
        data = datasets.ImageFolder("data/train", transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()]))
        loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=4)
        model = models.resnet18().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
        for epoch in range(args.epochs):
            for inputs, labels in loader:
                loss = torch.nn.functional.cross_entropy(model(inputs.to(device)), labels.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


    if __name__ == "__main__":
        main()
"""


def _job_notebook(args: str) -> str:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Train on Vertex AI\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["container_args = [\n", *[f'    "{a}",\n' for a in args.split()], "]\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": ["job.run(args=container_args)\n"]},
    ]  # fmt: skip
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


def _gpu103(tmp_path, monkeypatch, extra: dict) -> list[str]:
    from tests.projects_helper import lint_written

    (tmp_path / ".git").mkdir()
    return [f for f in lint_written(tmp_path, {"trainer/task.py": TASK, **extra}, monkeypatch) if "GPU103" in f]


@pytest.mark.parametrize(
    "extra",
    [
        {"train_job.ipynb": _job_notebook("--batch-size 256 --epochs 100")},  # the job's argument list, one item a line
        {"run.sh": "python trainer/task.py --batch-size=128 --epochs 10\n"},
        {"README.md": "Train with `python trainer/task.py --batch-size $BATCH_SIZE`.\n"},  # a value the command chooses
    ],
)
def test_silent_when_a_shipped_command_passes_a_larger_batch_size_than_the_argparse_default(tmp_path, monkeypatch, extra):
    assert _gpu103(tmp_path, monkeypatch, extra) == []


@pytest.mark.parametrize(
    "extra",
    [
        {},  # no command: the default runs
        {"train_job.ipynb": _job_notebook("--epochs 100")},  # the command leaves the batch size to its default
        {"run.sh": "python trainer/task.py --batch-size 8\n"},  # the command's own batch size is small too
        {"run.sh": "python trainer/task.py --batch-sizes 256\n"},  # another option
    ],
)
def test_reported_when_no_shipped_command_passes_a_larger_batch_size(tmp_path, monkeypatch, extra):
    assert _gpu103(tmp_path, monkeypatch, extra) == ["trainer/task.py:14 GPU103"]
