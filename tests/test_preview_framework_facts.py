"""GPU901-903 through facts the preview rules missed on the tenth corpus: an ignite `Engine(update)` that trains,
a model class looked up by name, library conv nets named by a string, and an explicit `cudnn.benchmark = False`."""

from __future__ import annotations

import textwrap

from tests.conftest import diagnostics, findings, fixed

PREVIEW = {"select": ("GPU9",)}

IGNITE = """\
    import torch
    from ignite.engine import Engine
    from torch.optim import Adam


    def train():
        model = {model}
        model.to("cuda")
        optimizer = Adam(model.parameters(), lr=1e-4)

        def update(engine, batch):
            model.train()
            loss = model(batch.to("cuda")).sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return loss.item()

        trainer = Engine(update)
        trainer.run(loader, max_epochs=3)


    if __name__ == "__main__":
        train()
    """


def test_an_ignite_engine_whose_step_trains_is_a_training_loop():
    # NAACL transfer-learning tutorial: no loop in the file, ignite's Engine.run calls `update` once per batch
    source = IGNITE.format(model="torch.nn.Transformer()")
    assert findings(source, **PREVIEW) == ["8:5 GPU902", "9:17 GPU904", "14:9 GPU901"]
    [gpu901] = [d for d in diagnostics(source, **PREVIEW) if d.code == "GPU901"]
    assert gpu901.message == "this script trains on CUDA in float32 only"


def test_an_ignite_engine_that_only_evaluates_stays_silent():
    source = IGNITE.format(model="torch.nn.Transformer()").replace("loss.backward()\n", "").replace(
        "optimizer.step()\n", ""
    )
    assert [f for f in findings(source, **PREVIEW) if "GPU901" in f or "GPU902" in f] == []


def test_an_ignite_step_under_autocast_is_not_reported_by_gpu901():
    source = IGNITE.format(model="torch.nn.Transformer()").replace(
        'loss = model(batch.to("cuda")).sum()',
        'with torch.autocast("cuda", dtype=torch.bfloat16):\n            loss = model(batch.to("cuda")).sum()',
    )
    assert "GPU901" not in " ".join(findings(source, **PREVIEW))


def test_a_model_class_looked_up_by_name_and_moved_is_a_model():
    source = """\
        import importlib

        import torch


        def train():
            ModelClass = getattr(importlib.import_module("finetuning_model"), args.model_class)
            model = ModelClass(config=config).to("cuda")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for batch in loader:
                model(batch.cuda()).sum().backward()
                optimizer.step()


        if __name__ == "__main__":
            train()
        """
    assert findings(source, **PREVIEW) == ["8:13 GPU902", "11:9 GPU901"]
    # a looked-up class that is never moved to the GPU says nothing
    assert findings(source.replace('.to("cuda")', ""), **PREVIEW) == []


LIBRARY = """\
    import torch
    {imports}

    model = {model}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("cuda")
    for batch in loader:
        loss = model(batch["pixel_values"].cuda()).sum()
        loss.backward()
        optimizer.step()
    """


def gpu903(imports: str, model: str) -> list[str]:
    return [f for f in findings(LIBRARY.format(imports=imports, model=model), **PREVIEW) if f.endswith("GPU903")]


def test_library_conv_nets_named_by_a_string_get_gpu903():
    hf = "from transformers import AutoModelForImageClassification, ConvNextForImageClassification, ResNetForImageClassification"
    for imports, model in (
        (hf, 'AutoModelForImageClassification.from_pretrained("facebook/convnext-tiny-224", num_labels=10)'),
        (hf, 'AutoModelForImageClassification.from_pretrained(pretrained_model_name_or_path="microsoft/resnet-50")'),
        (hf, "ConvNextForImageClassification.from_pretrained(checkpoint)"),
        (hf, "ResNetForImageClassification.from_pretrained(path)"),
        ("import timm", 'timm.create_model("resnet50d", pretrained=True, num_classes=2)'),
        ("from timm import create_model", 'create_model(model_name="efficientnet_b0")'),
        ("", 'torch.hub.load("pytorch/vision", "resnet50")'),
    ):
        assert gpu903(imports, model) == ["6:1 GPU903"], model


def test_library_transformers_and_unknown_names_are_not_conv_nets():
    hf = "from transformers import AutoModelForImageClassification, AutoImageProcessor, ViTForImageClassification"
    for imports, model in (
        (hf, 'AutoModelForImageClassification.from_pretrained("google/vit-base-patch16-224")'),
        (hf, 'ViTForImageClassification.from_pretrained("google/vit-base-patch16-224")'),
        (hf, "AutoModelForImageClassification.from_pretrained(args.checkpoint)"),  # not known
        ("import timm", 'timm.create_model("vit_base_patch16_224")'),
        ("import timm", 'timm.create_model("vit_base_r50_s16_384")'),  # hybrid: a ResNet stem under a ViT
        ("import timm", "timm.create_model(args.arch)"),
        ("", 'torch.hub.load("facebookresearch/dino:main", "dino_vits16")'),
    ):
        assert gpu903(imports, model) == [], model
    # an image processor of a conv-net checkpoint is not the model: a ViT trained next to it is not a conv net
    source = LIBRARY.format(
        imports=hf,
        model='ViTForImageClassification.from_pretrained("google/vit-base-patch16-224")\n'
        'processor = AutoImageProcessor.from_pretrained("facebook/convnext-tiny-224")',
    )
    assert not [f for f in findings(source, **PREVIEW) if f.endswith("GPU903")]


WAVEGLOW = """\
    import torch


    def train():
        model = torch.nn.Sequential(torch.nn.Conv1d(8, 8, 3), torch.nn.Conv1d(8, 8, 3), torch.nn.Conv1d(8, 8, 3)).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x.cuda()).sum().backward()
            optimizer.step()


    if __name__ == "__main__":
        torch.backends.cudnn.enabled = True
    {setting}
        train()
    """


def test_an_unconditional_cudnn_benchmark_false_is_torchs_default_spelled_out():
    source = WAVEGLOW.format(setting="    torch.backends.cudnn.benchmark = False")
    [found] = [d for d in diagnostics(source, **PREVIEW) if d.code == "GPU903"]
    assert (found.location.row, found.location.column) == (14, 5)  # the line to change
    assert found.message == (
        "a convolutional model trains on CUDA with `torch.backends.cudnn.benchmark = False`, cuDNN's heuristic algorithm choice"
    )
    assert "set `torch.backends.cudnn.benchmark = True`" in found.help
    # no fix: a start-up `benchmark = True` would be written over by the `False` below it
    assert "cudnn.benchmark = True" not in fixed(source, **PREVIEW)


def test_cudnn_benchmark_false_as_a_decision_stays_silent():
    for setting in (
        "    torch.backends.cudnn.benchmark = False\n    torch.backends.cudnn.deterministic = True",
        "    torch.use_deterministic_algorithms(True)\n    torch.backends.cudnn.benchmark = False",
        "    if args.deterministic:\n        torch.backends.cudnn.benchmark = False",
        "    torch.backends.cudnn.benchmark = args.benchmark",
        "    torch.backends.cudnn.benchmark = True",
        "    torch.backends.cudnn.enabled = False\n    torch.backends.cudnn.benchmark = False",
        # the UvA DL notebooks: reproducibility asked for, with a misspelt `deterministic` that torch ignores
        "    torch.backends.cudnn.determinstic = True\n    torch.backends.cudnn.benchmark = False",
    ):
        source = WAVEGLOW.format(setting=setting)
        assert not [f for f in findings(source, **PREVIEW) if f.endswith("GPU903")], setting


def test_a_lightning_trainer_after_cudnn_benchmark_false_is_reported_at_the_trainer_without_a_fix():
    from tests.test_framework_precision_settings import LIGHTNING

    source = LIGHTNING.format(setup="torch.backends.cudnn.benchmark = False", arguments="")
    [found] = [d for d in diagnostics(source, **PREVIEW) if d.code == "GPU903"]
    assert found.location.row == 21
    assert found.message == (
        "a convolutional model trains on CUDA with `torch.backends.cudnn.benchmark = False` (line 4), cuDNN's heuristic "
        "algorithm choice (the Lightning Trainer leaves `benchmark` unset)"
    )
    assert found.help.startswith("Pass `benchmark=True` to the Trainer, or set `torch.backends.cudnn.benchmark = True` instead")
    assert "cudnn.benchmark = True" not in fixed(source, **PREVIEW)
