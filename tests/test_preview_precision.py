"""Preview rules GPU901 no-mixed-precision, GPU902 no-tf32, GPU903 no-cudnn-benchmark."""

from __future__ import annotations

import re
import textwrap

from tests.conftest import diagnostics, findings, fixed, run_gpulint

PREVIEW = {"select": ("GPU9",)}

CONV_SCRIPT = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return self.conv(x).mean((1, 2, 3))


    def main():
        device = torch.device("cuda")
        model = Net().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            loss = model(x.to(device)).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main()
    """


def test_float32_conv_training_script_gets_all_three():
    assert findings(CONV_SCRIPT, **PREVIEW) == ["16:13 GPU902", "16:13 GPU903", "21:9 GPU901"]


def test_preview_rules_are_off_by_default_and_on_when_selected():
    assert findings(CONV_SCRIPT) == []
    assert findings(CONV_SCRIPT, preview=True) == ["16:13 GPU902", "16:13 GPU903", "21:9 GPU901"]
    assert findings(CONV_SCRIPT, select=("GPU903",)) == ["16:13 GPU903"]


def test_fixes_insert_the_settings_after_the_imports_together():
    result = fixed(CONV_SCRIPT, **PREVIEW)
    assert result.startswith(
        textwrap.dedent(
            """\
            import torch
            from torch import nn

            torch.set_float32_matmul_precision("high")
            torch.backends.cudnn.benchmark = True


            class Net(nn.Module):
            """
        )
    )
    assert fixed(result, **PREVIEW) == result
    assert findings(result, **PREVIEW) == ["24:9 GPU901"]  # autocast is for the user to add


def test_fixes_are_unsafe():
    assert fixed(CONV_SCRIPT, unsafe=False, **PREVIEW) == textwrap.dedent(CONV_SCRIPT)


def test_no_fix_when_torch_is_not_imported_at_the_top():
    source = """\
        import sys

        sys.path.insert(0, ".")
        import torch

        model = torch.nn.Linear(4096, 4096).cuda()
        for x in batches:
            model(x.cuda()).sum().backward()
        """
    (diagnostic,) = diagnostics(source, select=("GPU902",))
    assert diagnostic.fix is None


def test_module_level_training_loop_counts_as_a_script():
    source = """\
        import torch as th

        model = th.nn.Sequential(th.nn.Linear(4096, 4096)).cuda()
        opt = th.optim.Adam(model.parameters())
        for x in batches:
            model(x.cuda()).sum().backward()
            opt.step()
        """
    assert findings(source, **PREVIEW) == ["3:9 GPU902", "4:7 GPU904", "6:5 GPU901"]
    assert 'import torch as th\n\nth.set_float32_matmul_precision("high")\n' in fixed(source, select=("GPU902",))


def test_library_function_receiving_a_model_is_not_a_script():
    source = """\
        import torch


        def train(model, loader, optimizer):
            model.cuda()
            for x in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()
        """
    assert findings(source, **PREVIEW) == []


def test_script_that_does_not_train_is_silent():
    source = """\
        import torch

        if __name__ == "__main__":
            model = torch.nn.Conv2d(3, 3, 3).cuda()
            print(model(torch.randn(1, 3, 8, 8, device="cuda")))
        """
    assert findings(source, **PREVIEW) == []


TRAIN = """\
    import torch
    {imports}
    {setup}
    model = {model}.cuda()
    for x in batches:
        {forward}
        loss.backward()
        optimizer.step()
    """


def script(
    setup: str = "",
    model: str = "torch.nn.Conv2d(3, 8, 3)",
    forward: str = "loss = model(x.cuda()).sum()",
    imports: str = "",
) -> str:
    return TRAIN.format(setup=setup, model=model, forward=forward, imports=imports)


def codes(source: str) -> list[str]:
    return [re.sub(r"^\d+:\d+ ", "", f) for f in findings(source, **PREVIEW)]


def test_autocast_silences_gpu901_only():
    source = script(forward='with torch.autocast("cuda", dtype=torch.bfloat16): loss = model(x.cuda()).sum()')
    assert codes(source) == ["GPU902", "GPU903"]


def test_mixed_precision_signals_silence_gpu901():
    assert "GPU901" not in codes(script(imports="from torch.cuda.amp import autocast"))
    assert "GPU901" not in codes(script(setup='parser.add_argument("--amp", action="store_true")'))
    assert "GPU901" not in codes(script(imports="from accelerate import Accelerator"))
    assert "GPU901" not in codes(script(setup="trainer = make_trainer(precision=16)"))


def test_reduced_or_double_parameters_silence_gpu901_and_gpu902():
    for model in ("torch.nn.Conv2d(3, 8, 3).half()", "torch.nn.Conv2d(3, 8, 3).double()"):
        assert codes(script(model=model)) == ["GPU903"]
    assert codes(script(setup="torch.set_default_dtype(torch.float64)")) == ["GPU903"]
    assert codes(script(setup="model = model.to(torch.float64)")) == ["GPU903"]


def test_a_float64_tensor_beside_a_float32_model_is_no_double_model():
    # shaped like DomainBed's EQRM: `register_buffer("alpha", torch.tensor(q, dtype=torch.float64))`
    for setup in ("alpha = torch.tensor(0.75, dtype=torch.float64)", "acc = torch.zeros(10, dtype=torch.double)"):
        assert codes(script(setup=setup)) == ["GPU902", "GPU903", "GPU901"]
    # a half tensor fed to the model needs a half model: still not float32 training
    assert codes(script(setup="x0 = torch.zeros(10, dtype=torch.float16)")) == ["GPU903"]


def test_tf32_settings_silence_gpu902():
    for setting in (
        'torch.set_float32_matmul_precision("medium")',
        "torch.backends.cuda.matmul.allow_tf32 = True",
        'torch.backends.cuda.matmul.fp32_precision = "tf32"',
    ):
        assert "GPU902" not in codes(script(setup=setting))


def test_cudnn_settings_silence_gpu903():
    for setting in (
        "torch.backends.cudnn.benchmark = args.benchmark",
        "torch.backends.cudnn.deterministic = True",
        "torch.use_deterministic_algorithms(True)",
    ):
        assert "GPU903" not in codes(script(setup=setting))
    assert "GPU903" not in codes(script(imports="import torch.backends.cudnn as cudnn", setup="cudnn.benchmark = True"))


def test_gpu903_needs_convolutions():
    assert "GPU903" not in codes(script(model="torch.nn.Linear(8, 8)"))
    assert "GPU903" in codes(script(imports="import torchvision", model="torchvision.models.resnet18()"))
    assert "GPU903" not in codes(script(imports="import torchvision", model="torchvision.models.vit_b_16()"))


def test_models_from_functions_of_the_module_are_found():
    source = """\
        import torch
        from torch import nn


        def build():
            return nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten())


        if __name__ == "__main__":
            net = build().to("cuda")
            for x in batches:
                net(x.cuda()).sum().backward()
        """
    assert codes(source) == ["GPU902", "GPU903", "GPU901"]


def test_cli_reports_preview_rules_only_with_preview():
    default = run_gpulint("check", "--output-format", "concise", "fixtures/")
    preview = run_gpulint("check", "--preview", "--output-format", "concise", "fixtures/")
    default_codes = set(re.findall(r" (GPU\d{3}) ", default.stdout.decode()))
    preview_codes = set(re.findall(r" (GPU\d{3}) ", preview.stdout.decode()))
    assert not {c for c in default_codes if c.startswith("GPU9")}
    assert {"GPU901", "GPU902", "GPU903"} <= preview_codes
    assert default_codes <= preview_codes
    convnet = [line for line in preview.stdout.decode().splitlines() if line.startswith("fixtures/convnet_amp.py")]
    assert any(" GPU902 " in line for line in convnet) and any(" GPU903 " in line for line in convnet)
    assert not any(" GPU901 " in line for line in convnet)  # it uses (deprecated) autocast


def test_flags_that_merely_contain_amp_do_not_silence_gpu901():
    # PyTorch-GAN: `--sample_interval` contains "amp" but is not a mixed-precision switch.
    source = script(setup='parser.add_argument("--sample_interval", type=int, default=400)')
    assert "GPU901" in codes(source)


LIGHTNING_SCRIPT = """\
    import lightning.pytorch as pl
    from models import Classifier
    {setup}

    def main():
        trainer = pl.Trainer(accelerator="auto", devices="auto", max_epochs=5{arguments})
        trainer.fit(Classifier())


    if __name__ == "__main__":
        main()
    """


def test_a_lightning_trainer_on_the_gpu_in_float32_gets_gpu902_where_gpu901_is():
    source = LIGHTNING_SCRIPT.format(setup="", arguments="")
    [tf32] = [d for d in diagnostics(source, **PREVIEW) if d.code == "GPU902"]
    assert (tf32.location.row, tf32.message) == (6, "the Lightning Trainer runs float32 matrix multiplications on CUDA without TF32")
    assert codes(source) == ["GPU901", "GPU902"]
    assert fixed(source, **PREVIEW) == textwrap.dedent(source)  # no `import torch` to set it with
    with_torch = source.replace("import lightning.pytorch as pl", "import torch\n    import lightning.pytorch as pl")
    assert "from models import Classifier\n\ntorch.set_float32_matmul_precision(\"high\")\n" in fixed(with_torch, **PREVIEW)


def test_a_lightning_trainer_with_tf32_mixed_precision_or_on_the_cpu_has_no_gpu902():
    tf32 = 'import torch\ntorch.set_float32_matmul_precision("medium")'
    assert "GPU902" not in codes(LIGHTNING_SCRIPT.format(setup=tf32, arguments=""))
    assert "GPU902" not in codes(LIGHTNING_SCRIPT.format(setup="", arguments=', precision="bf16-mixed"'))
    assert "GPU902" not in codes(LIGHTNING_SCRIPT.format(setup="", arguments=', precision="64-true"'))
    assert codes(LIGHTNING_SCRIPT.format(setup="", arguments="").replace('accelerator="auto"', 'accelerator="cpu"')) == []


# shaped like awesome-semantic-segmentation-pytorch: `get_segmentation_model` returns `models[name](**kwargs)`
# from a dict of builders, and the training script moves what it returns
ZOO = """\
    from torch import nn


    def get_fcn(**kwargs):
        return nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


    def get_psp(**kwargs):
        return nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 10))


    def get_model(name, **kwargs):
        return {"fcn": get_fcn, "psp": get_psp}[name](**kwargs)
"""
ZOO_TRAIN = """\
    import torch

    from zoo import get_model


    def main(args):
        device = torch.device("cuda")
        {bound} = get_model(args.model).to(device)
        optimizer = torch.optim.SGD({used}, lr=0.1)
        for x in loader:
            loss = {forward}(x.to(device)).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main(None)
"""


def test_a_project_factory_of_unknown_result_bound_to_a_module_is_a_model(tmp_path, monkeypatch):
    from tests.projects_helper import found as as_text, lint, write

    train = ZOO_TRAIN.format(bound="net", used="net.parameters()", forward="net")
    diagnostics = lint(write(tmp_path, {"zoo.py": ZOO, "train.py": train}), monkeypatch, select=("GPU901", "GPU902"), preview=True)
    assert as_text(diagnostics) == ["train.py:8 GPU902", "train.py:13 GPU901"]


def test_a_project_factory_result_never_used_as_a_module_is_no_model(tmp_path, monkeypatch):
    from tests.projects_helper import found as as_text, lint, write

    # the moved value is a tensor the loop reads: no model moved, nothing to report
    train = ZOO_TRAIN.format(bound="bias", used="[w]", forward="bias.add")
    diagnostics = lint(write(tmp_path, {"zoo.py": ZOO, "train.py": train}), monkeypatch, select=("GPU901", "GPU902"), preview=True)
    assert as_text(diagnostics) == []


# shaped like x-transformers' train_enwik8.py: `Accelerator(cpu=cpu)` and `accelerator.prepare(model, ...)` place
# the model; nothing asks for mixed precision
ACCELERATE_SCRIPT = """\
    import torch
    from torch import nn
    from accelerate import Accelerator

    cpu = False
    accelerator = Accelerator({arguments})
    model = nn.Sequential({layers})
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optim, loader = accelerator.prepare(model, optim, loader)
    for x in loader:
        loss = model(x).sum()
        accelerator.backward(loss)
        optim.step()
        optim.zero_grad()
"""
_WIDE = "nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)"


def accelerate_script(arguments: str = "cpu=cpu", layers: str = _WIDE) -> str:
    return ACCELERATE_SCRIPT.format(arguments=arguments, layers=layers)


def test_an_accelerator_without_mixed_precision_trains_the_prepared_model_in_float32():
    # GPU902 where accelerate places the model, GPU901 at the backward
    assert findings(accelerate_script(), **PREVIEW) == ["9:24 GPU902", "12:5 GPU901"]
    assert findings(accelerate_script("device_placement=True"), **PREVIEW) == ["9:24 GPU902", "12:5 GPU901"]


def test_an_accelerator_that_may_train_in_mixed_precision_silences_gpu901():
    for arguments in ("mixed_precision=args.precision", "**accelerate_kwargs"):
        assert findings(accelerate_script(arguments), **PREVIEW) == ["9:24 GPU902"], arguments
    # a half precision named: the matmuls run in bf16 under accelerate's autocast, TF32 is beside the point
    assert findings(accelerate_script('mixed_precision="bf16"'), **PREVIEW) == []


def test_an_accelerator_that_places_nothing_on_the_gpu_is_silent():
    for arguments in ("cpu=True", "device_placement=False"):
        assert findings(accelerate_script(arguments), **PREVIEW) == [], arguments


def test_a_toy_model_the_accelerator_places_is_launch_bound():
    assert findings(accelerate_script(layers="nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2)"), **PREVIEW) == []


# shaped like audiolm-pytorch's SoundStreamTrainer: the conv net comes in as a constructor argument typed with
# the project class that builds it
NETS = """\
    from torch import nn


    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv1d(1, 32, 7), nn.Conv1d(32, 32, 7), nn.Conv1d(32, 1, 7))

        def forward(self, x):
            return self.body(x)


    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4096, 4096), nn.Linear(4096, 4096))

        def forward(self, x):
            return self.body(x)
"""
TYPED_TRAINER = """\
    import torch

    from nets import ConvNet, Mlp


    class Trainer:
        def __init__(self, net: {annotation}, loader):
            self.net = net
            self.net.to(torch.device("cuda"))
            self.loader = loader
            self.optim = torch.optim.SGD(self.net.parameters(), lr=0.1)

        def train(self):
            for x in self.loader:
                loss = self.net(x.cuda()).sum()
                self.optim.zero_grad()
                loss.backward()
                self.optim.step()
"""


def _typed_trainer(tmp_path, monkeypatch, annotation: str) -> list[str]:
    from tests.projects_helper import found as as_text, lint, write

    files = {"nets.py": NETS, "trainer.py": TYPED_TRAINER.format(annotation=annotation)}
    return as_text(lint(write(tmp_path, files), monkeypatch, select=("GPU903",), preview=True))


def test_a_parameter_typed_as_a_project_conv_net_brings_its_convolutions(tmp_path, monkeypatch):
    assert _typed_trainer(tmp_path, monkeypatch, "ConvNet") == ["trainer.py:9 GPU903"]
    assert _typed_trainer(tmp_path, monkeypatch, "ConvNet | None") == ["trainer.py:9 GPU903"]


def test_a_parameter_typed_as_a_project_mlp_brings_none(tmp_path, monkeypatch):
    assert _typed_trainer(tmp_path, monkeypatch, "Mlp") == []


# shaped like lightly's ImageNet benchmarks: the model class comes from a registry of the project's methods
REGISTRY_SCRIPT = """\
    import sys

    import torch

    import nets

    METHODS = {{
        "a": {{"model": nets.ConvNet, "lr": 0.1}},
        "b": {{"model": nets.{other}, "lr": 0.2}},
    }}


    def main(method):
        model_class = METHODS[method]["model"]
        model = model_class()
        model.cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=METHODS[method]["lr"])
        for x in loader:
            loss = model(x.cuda()).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        main(sys.argv[1])
"""


def _registry_script(tmp_path, monkeypatch, other: str) -> list[str]:
    from tests.projects_helper import found as as_text, lint, write

    files = {"nets.py": NETS, "main.py": REGISTRY_SCRIPT.format(other=other)}
    return as_text(lint(write(tmp_path, files), monkeypatch, select=("GPU903",), preview=True))


def test_a_registry_of_project_conv_nets_brings_their_convolutions(tmp_path, monkeypatch):
    assert _registry_script(tmp_path, monkeypatch, "ConvNet") == ["main.py:16 GPU903"]


def test_a_registry_that_may_give_a_model_without_convolutions_brings_none(tmp_path, monkeypatch):
    assert _registry_script(tmp_path, monkeypatch, "Mlp") == []


# shaped like facebookresearch/denoiser: train.py moves the model and hands it to a Solver whose train() loops
SOLVER = """\
    class Solver:
        def __init__(self, loader, model, optimizer):
            self.loader, self.model, self.optimizer = loader, model, optimizer

        def train(self):
            {body}

        def step(self, x):
            loss = self.model(x.cuda()).sum()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""
SOLVER_SCRIPT = """\
    import torch

    from nets import ConvNet
    from solver import Solver


    def main(loader):
        model = ConvNet()
        model.cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        Solver(loader, model, optimizer).train()


    if __name__ == "__main__":
        main(None)
"""


def _solver_script(tmp_path, monkeypatch, body: str) -> list[str]:
    from tests.projects_helper import found as as_text, lint, write

    files = {"nets.py": NETS, "solver.py": SOLVER.format(body=body), "train.py": SOLVER_SCRIPT}
    return [f for f in as_text(lint(write(tmp_path, files), monkeypatch, select=("GPU903",), preview=True)) if f.startswith("train.py")]


def test_a_script_that_hands_its_model_to_a_training_loop_elsewhere_trains(tmp_path, monkeypatch):
    body = "for epoch in range(10):\n                for x in self.loader:\n                    self.step(x)"
    assert _solver_script(tmp_path, monkeypatch, body) == ["train.py:9 GPU903"]


def test_a_helper_that_runs_one_step_is_no_training_run(tmp_path, monkeypatch):
    assert _solver_script(tmp_path, monkeypatch, "self.step(next(iter(self.loader)))") == []
