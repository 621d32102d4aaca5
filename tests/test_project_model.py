"""The project model: facts across modules and calls (issue 14, points 1, 3, 4 and 6).

Fixture projects live in tests/projects/ (shaped like research code, vendor examples and tutorials);
smaller ones are written inline. Each test lints a whole project the way `gpulint check .` does.
"""

from __future__ import annotations

import ast
import json
import textwrap

import pytest

from gpulint.analysis.summary import ModuleSummary, summarize
from gpulint.config import Settings
from gpulint.linter import check_source
from tests.conftest import UNPROVEN_COST_TOML, run_gpulint
from tests.projects_helper import PROJECTS, copy_project, found, lint, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

# ---- the fixture projects ------------------------------------------------------------------------------


def test_research_layout_data_model_utils_train(tmp_path, monkeypatch):
    root = copy_project("research", tmp_path)
    diagnostics = lint(root, monkeypatch)
    assert found(diagnostics) == ["data.py:20 GPU102", "data.py:20 GPU104", "train.py:20 GPU303"]
    pin, workers, sync = diagnostics
    # data.py never names a device: its loader feeds the GPU loop of train.py through utils.to_device
    assert pin.message.endswith("its batches reach the GPU")
    assert "(they are copied to the GPU at utils.py:6, in the loop at train.py:13)" in pin.help
    assert pin.fix is not None and pin.fix.edits[0].content == ", pin_memory=torch.cuda.is_available()"
    # the helper syncs on the argument it is given: reported at the call, with where it syncs
    assert sync.message.startswith("`accuracy(output, labels)` (`.item()` at utils.py:10) waits for the GPU every training step (loop at line 13)")
    # `log_every(step, loss)` syncs only under `if step % every == 0:` inside the helper: not reported
    # the loader's workers: train.py's `for epoch` loop runs `train_epoch`, whose loop takes its batches
    assert workers.message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at train.py:31 "
        "(its batches are taken at train.py:13)"
    )


def test_a_module_alone_knows_nothing_of_its_project():
    data = (PROJECTS / "research" / "data.py").read_text(encoding="utf-8")
    assert check_source(data, "data.py", Settings(root=PROJECTS / "research")) == []


def test_vendor_example_with_packages_re_exports_and_an_engine(tmp_path, monkeypatch):
    root = copy_project("vendor", tmp_path)
    diagnostics = lint(root, monkeypatch)
    assert found(diagnostics) == [
        "detection/datasets/shapes.py:27 GPU102",  # main -> build_loader (re-exported by datasets/__init__.py) -> engine's loop
        "detection/datasets/shapes.py:27 GPU104",  # ... which main runs once per epoch
        "detection/engine.py:19 GPU303",  # loss_value(losses) calls `.item()` (util/misc.py)
        "detection/engine.py:20 GPU304",  # wait_for_gpu() synchronizes every step
        "detection/engine.py:30 GPU303",  # `if step_stats(outputs) > 0.5:` in the evaluation loop
    ]
    by_line = {d.location.row: d for d in diagnostics}
    assert "`wait_for_gpu()` (`torch.cuda.synchronize()` at detection/util/misc.py:21)" in by_line[20].message
    assert by_line[30].severity.value == "info"  # an evaluation loop
    # `move_targets` copies with non_blocking=True and the engine's print is under `step % print_freq`: silent


def test_tutorial_that_picks_its_device_with_torch_accelerator(tmp_path, monkeypatch):
    root = copy_project("tutorial", tmp_path)
    assert found(lint(root, monkeypatch)) == ["main.py:18 GPU303", "main.py:26 GPU101", "main.py:26 GPU102"]


def test_expert_code_has_nothing_to_report(tmp_path, monkeypatch):
    # a correct prefetcher, pinned + non_blocking + workers, syncs under `if step % log_every == 0` (at the
    # call and inside a helper), one-time set-up that synchronizes, a helper that only detaches
    root = copy_project("careful", tmp_path)
    assert found(lint(root, monkeypatch)) == []


def test_the_same_project_on_the_cpu_is_not_gpu_code(tmp_path, monkeypatch):
    root = copy_project("research", tmp_path)
    train = root / "train.py"
    train.write_text(
        train.read_text().replace('torch.device("cuda" if torch.cuda.is_available() else "cpu")', '"cpu"'), encoding="utf-8"
    )
    assert found(lint(root, monkeypatch)) == []


# ---- imports ----------------------------------------------------------------------------------------------


PACKAGE = {
    "src/shop/__init__.py": "",
    "src/shop/data.py": """\
        from torch.utils.data import DataLoader

        def make_loaders(dataset):
            return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)
        """,
    "src/shop/helpers.py": """\
        def to_gpu(batch, device):
            return [t.to(device) for t in batch]
        """,
    "src/shop/train.py": """\
        import torch
        from . import helpers
        from .data import make_loaders


        def fit(model, dataset, optimizer):
            device = torch.device("cuda")
            for batch in make_loaders(dataset):
                x, y = helpers.to_gpu(batch, device)
                optimizer.zero_grad()
                model(x, y).backward()
                optimizer.step()
        """,
}


def test_relative_imports_and_a_src_layout(tmp_path, monkeypatch):
    root = write(tmp_path, PACKAGE)
    [pin] = lint(root, monkeypatch)
    assert found([pin]) == ["src/shop/data.py:4 GPU102"]
    assert "`helpers.to_gpu(batch, device)` at line 9" not in pin.message  # reported in data.py, names train.py
    assert "copied to the GPU at src/shop/helpers.py:2, in the loop at src/shop/train.py:8" in pin.help


def test_absolute_imports_of_the_package_from_a_script(tmp_path, monkeypatch):
    files = dict(PACKAGE)
    files["src/shop/train.py"] = files["src/shop/train.py"].replace("from . import helpers", "import shop.helpers as helpers")
    files["src/shop/train.py"] = files["src/shop/train.py"].replace("from .data import", "from shop.data import")
    root = write(tmp_path, files)
    assert found(lint(root, monkeypatch)) == ["src/shop/data.py:4 GPU102"]


def test_an_import_the_project_does_not_have_stays_unknown(tmp_path, monkeypatch):
    # `to_gpu` comes from an installed library: it is not guessed to copy (or not), so the only GPU evidence
    # is the model moved to CUDA; the loader feeds its training loop, and that is what GPU102 says.
    root = write(
        tmp_path,
        {
            "train.py": """\
                from torch import nn
                from torch.utils.data import DataLoader
                from acme_tools import to_gpu


                def fit(dataset, optimizer):
                    model = nn.Linear(8, 2).cuda()
                    for batch in DataLoader(dataset, batch_size=64, num_workers=4):
                        x, y = to_gpu(batch)
                        optimizer.zero_grad()
                        model(x, y).backward()
                        optimizer.step()
                """,
            "data.py": "def to_gpu(batch):\n    return [t.cuda() for t in batch]\n",  # same name, never imported
        },
    )
    [pin] = lint(root, monkeypatch)
    assert found([pin]) == ["train.py:8 GPU102"]
    assert pin.message.endswith("reach the GPU") and "(they feed the training loop at line 8, which runs a GPU model)" in pin.help


# ---- GPU context from facts ------------------------------------------------------------------------------


ENGINE = """\
    def run(model, loader, optimizer, device):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = model(x, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())
    """


@pytest.mark.parametrize(
    "given, expected",
    [
        ('torch.device("cuda")', ["engine.py:8 GPU303"]),
        ('"cuda:0"', ["engine.py:8 GPU303"]),
        ('torch.device(args.device)', ["engine.py:8 GPU303"]),  # chosen at run time
        ("device", ["engine.py:8 GPU303"]),  # passed on by a caller whose callers give CUDA
        ('"cpu"', []),
        ('torch.device("cpu")', []),
    ],
)
def test_a_device_parameter_is_gpu_context_when_callers_give_a_cuda_device(tmp_path, monkeypatch, given, expected):
    main = f"""\
        import torch
        from engine import run


        def start(model, loader, optimizer, args, device):
            run(model, loader, optimizer, {given})


        def outer(model, loader, optimizer, args):
            start(model, loader, optimizer, args, torch.device("cuda"))
        """
    root = write(tmp_path, {"engine.py": ENGINE, "main.py": main})
    assert found(lint(root, monkeypatch)) == expected


@pytest.mark.parametrize("device", ["local_rank", "args.gpu", "gpu_id", "rank"])
def test_a_rank_or_gpu_index_used_as_a_device_is_gpu_context(tmp_path, monkeypatch, device):
    root = write(
        tmp_path,
        {
            "train.py": f"""\
                def fit(model, loader, optimizer, args, local_rank, gpu_id, rank):
                    for x in loader:
                        loss = model(x.to({device}))
                        loss.backward()
                        optimizer.step()
                        print(loss.item())
                """
        },
    )
    assert found(lint(root, monkeypatch)) == ["train.py:6 GPU303"]


def test_a_device_from_a_config_module(tmp_path, monkeypatch):
    root = write(
        tmp_path,
        {
            "config.py": 'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
            "train.py": """\
                from config import device


                def fit(model, loader, optimizer):
                    for x in loader:
                        loss = model(x.to(device))
                        loss.backward()
                        optimizer.step()
                        print(loss.item())
                """,
        },
    )
    assert found(lint(root, monkeypatch)) == ["train.py:9 GPU303"]


def test_a_model_module_is_gpu_context_when_its_class_is_moved_to_the_gpu_elsewhere(tmp_path, monkeypatch):
    model = """\
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)


        def fit(net, loader, optimizer):
            for x in loader:
                noise = torch.randn(x.shape).to(x.device)
                net(x + noise).sum().backward()
                optimizer.step()


        __all__ = ["Net", "fit"]  # API: `fit` is called by users, not by this project (analysis/uncalled.py)
        """
    root = write(tmp_path, {"models.py": model, "train.py": "from models import Net\n\nnet = Net().cuda()\n"})
    assert found(lint(root, monkeypatch)) == ["models.py:16 GPU201"]
    (root / "train.py").write_text("from models import Net\n\nnet = Net()\n")
    assert found(lint(root, monkeypatch)) == []


# ---- residency across modules (point 4) --------------------------------------------------------------------


TRAINER = """\
    def train(model, criterion, loader, optimizer):
        for inputs, targets in loader:
            loss = criterion(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total = float(loss)
    """


@pytest.mark.parametrize(
    "build, expected",
    [
        ("build_model().cuda()", ["trainer.py:7 GPU303"]),  # a project factory's module, moved here
        ("build_gpu_model()", ["trainer.py:7 GPU303"]),  # a project factory that returns it on the GPU
        ("Net().to(device)", ["trainer.py:7 GPU303"]),  # a class of another module
        ("build_model()", []),  # on the CPU: `float(loss)` is a plain conversion
    ],
)
def test_a_model_on_the_gpu_passed_to_another_module_makes_its_outputs_gpu_values(tmp_path, monkeypatch, build, expected):
    files = {
        "models.py": """\
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    return x

            def build_model():
                return Net()

            def build_gpu_model():
                return build_model().cuda()
            """,
        "trainer.py": TRAINER,
        "main.py": f"""\
            import torch
            from models import Net, build_gpu_model, build_model
            from trainer import train

            device = torch.device("cuda")
            model = {build}
            train(model, torch.nn.MSELoss(), [], torch.optim.SGD(model.parameters()))
            """,
    }
    root = write(tmp_path, files)
    assert found(lint(root, monkeypatch)) == expected


# ---- per-step code reached through calls (point 6) ---------------------------------------------------------


def test_helpers_called_every_step_within_one_module(tmp_path, monkeypatch):
    root = write(
        tmp_path,
        {
            "train.py": """\
                import torch


                def record(history, loss):
                    history.append(loss.item())


                def checkpoint(model):
                    torch.cuda.synchronize()


                def fit(model, loader, optimizer, history):
                    model.cuda()
                    checkpoint(model)
                    for step, (x, y) in enumerate(loader):
                        loss = model(x.cuda(), y.cuda())
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        record(history, loss)
                        if step % 100 == 0:
                            checkpoint(model)
                """
        },
    )
    assert found(lint(root, monkeypatch)) == ["train.py:5 GPU303"]  # `record`'s read, reported in the helper


def test_a_helper_with_its_own_loop_is_an_epoch_not_a_step(tmp_path, monkeypatch):
    root = write(
        tmp_path,
        {
            "engine.py": """\
                def train_one_epoch(model, loader, optimizer):
                    for x in loader:
                        loss = model(x.cuda())
                        loss.backward()
                        optimizer.step()
                    return loss.item()
                """,
            "main.py": """\
                from engine import train_one_epoch


                def main(model, loader, optimizer):
                    for epoch in range(10):
                        print(train_one_epoch(model, loader, optimizer))
                """,
        },
    )
    assert found(lint(root, monkeypatch)) == []


# ---- caching: a file's result is keyed by its bytes and its context ----------------------------------------


def test_editing_a_helper_rechecks_its_importers_only(tmp_path, monkeypatch):
    import gpulint.linter

    root = copy_project("research", tmp_path)
    assert found(lint(root, monkeypatch, use_cache=True)) == ["data.py:20 GPU102", "data.py:20 GPU104", "train.py:20 GPU303"]
    checked: list[str] = []
    original = gpulint.linter._check_bytes
    monkeypatch.setattr(gpulint.linter, "_check_bytes", lambda shown, *a, **k: checked.append(shown) or original(shown, *a, **k))
    assert found(lint(root, monkeypatch, use_cache=True)) == ["data.py:20 GPU102", "data.py:20 GPU104", "train.py:20 GPU303"]
    assert checked == []  # warm: nothing re-checked
    utils = root / "utils.py"
    utils.write_text(utils.read_text() + "\n# a comment changes no summary\n")
    lint(root, monkeypatch, use_cache=True)
    assert checked == ["utils.py"]  # its own bytes changed; its importers' contexts did not
    checked.clear()
    utils.write_text(utils.read_text().replace(".mean().item()", ".mean()"))
    assert found(lint(root, monkeypatch, use_cache=True)) == ["data.py:20 GPU102", "data.py:20 GPU104"]
    assert sorted(checked) == ["train.py", "utils.py"]  # train.py's context changed: `accuracy` no longer syncs


def test_checking_one_file_uses_the_index_of_its_project(tmp_path):
    root = copy_project("research", tmp_path)
    (root / "pyproject.toml").write_text("[tool.gpulint]\n" + UNPROVEN_COST_TOML)  # (one read a step: its cost is not shown)
    result = run_gpulint("check", "--output-format", "concise", "data.py", cwd=root)
    assert result.stdout.decode().splitlines()[0].startswith("data.py:20:13: GPU102")
    result = run_gpulint("check", "--output-format", "concise", "src/../train.py" if False else "train.py", cwd=root)
    assert "train.py:20:15: GPU303 `accuracy(output, labels)` (`.item()` at utils.py:10)" in result.stdout.decode()


# ---- summaries are small plain data -----------------------------------------------------------------------


def test_a_summary_holds_no_tree_and_round_trips_through_json():
    text = (PROJECTS / "vendor" / "detection" / "engine.py").read_text(encoding="utf-8")
    summary = summarize(text)
    data = json.loads(json.dumps(summary.to_json()))
    assert ModuleSummary.from_json(data) == summary

    def nodes(value):
        if isinstance(value, ast.AST):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                yield from nodes(item)
        elif isinstance(value, dict):
            for item in value.values():
                yield from nodes(item)

    assert not list(nodes(summary.to_json()))
    train = summary.functions["train_one_epoch"]
    assert train.trains and train.params[:3] == ("model", "criterion", "data_loader")
    assert ("iter", 0) in train.effects["p:data_loader"]


def test_a_file_python_cannot_parse_has_an_empty_summary():
    assert summarize("def broken(:\n").ok is False


# ---- star imports of project modules --------------------------------------------------------------------

STAR_MODEL = """\
    import torch
    import torch.nn as nn
    {exports}

    class DeepLab(nn.Module):
        def __init__(self, num_classes=21):
            super().__init__()
            self.conv = nn.Conv2d(3, num_classes, 3)

        def forward(self, x):
            return self.conv(x)
"""
STAR_TRAIN = """\
    from modeling.deeplab import *


    class Trainer:
        def __init__(self, loader):
            self.loader = loader
            model = DeepLab()
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            self.model = nn.DataParallel(model)
            self.model = self.model.cuda()

        def training(self):
            for image, target in self.loader:
                self.optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(self.model(image), target)
                loss.backward()
                self.optimizer.step()
                print(loss.item())
"""


@pytest.mark.parametrize(
    ("exports", "expected"),
    [
        ("", ["train.py:9 GPU401", "train.py:18 GPU303"]),  # `torch` and `nn` come in with the star import
        ('__all__ = ["DeepLab"]', []),  # `__all__` limits the star import to DeepLab: `torch` is unknown here
        ('__all__ = ["DeepLab", "nn"]', ["train.py:9 GPU401", "train.py:18 GPU303"]),
    ],
)
def test_a_star_import_of_a_project_module_binds_the_modules_it_imported(tmp_path, monkeypatch, exports, expected):
    files = {"modeling/__init__.py": "", "modeling/deeplab.py": STAR_MODEL.format(exports=exports), "train.py": STAR_TRAIN}
    diagnostics = lint(write(tmp_path, files), monkeypatch)
    assert found(diagnostics) == expected
    if "train.py:9 GPU401" in expected:
        assert diagnostics[0].message == "`DataParallel` (it spreads over every visible GPU) runs one process with a thread per GPU"


def test_a_name_the_star_importing_module_binds_itself_is_its_own(tmp_path, monkeypatch):
    # `nn` rebound after the star import to a project module: `nn.DataParallel` is that module's, not torch's
    files = {
        "modeling/__init__.py": "",
        "modeling/deeplab.py": STAR_MODEL.format(exports=""),
        "mynn.py": "class DataParallel:\n    def __init__(self, module):\n        self.module = module\n",
        "train.py": textwrap.dedent(STAR_TRAIN).replace("*\n", "*\nimport mynn as nn\n", 1),
    }
    assert found(lint(write(tmp_path, files), monkeypatch)) == []  # no GPU401 (and a model of unknown kind)


def test_a_star_import_records_the_exports_it_reads():
    assert summarize("import torch\n").exports is None
    assert summarize('import torch\n__all__ = ["A", "b"]\n').exports == ("A", "b")
    assert summarize("__all__ = [n for n in dir()]\n").exports == ()
    assert ModuleSummary.from_json(json.loads(json.dumps(summarize('__all__ = ("A",)\n').to_json()))).exports == ("A",)


@pytest.mark.parametrize(
    ("wrap", "expected"),
    [
        ("torch.nn.DataParallel(self.model, device_ids=self.args.gpu_ids)", ["train.py:13 GPU902"]),
        ("self.build(self.model)", []),  # whatever `build` returns: not known to be a model
    ],
)
def test_a_model_kept_on_self_and_moved_there(tmp_path, monkeypatch, wrap, expected):
    # shaped like deeplab-xception's Trainer: `self.model, self.optimizer = model, optimizer`, wrapped, then moved
    train = f"""\
        from modeling.deeplab import *


        class Trainer:
            def __init__(self, args, loader):
                self.args, self.loader = args, loader
                model = DeepLab()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                self.model, self.optimizer = model, optimizer
                if args.cuda:
                    self.model = {wrap}
                    patch_replication_callback(self.model)
                    self.model = self.model.cuda()

            def training(self):
                for image, target in self.loader:
                    self.optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(self.model(image.cuda()), target.cuda()).backward()
                    self.optimizer.step()


        if __name__ == "__main__":
            Trainer(None, []).training()
    """
    files = {"modeling/__init__.py": "", "modeling/deeplab.py": STAR_MODEL.format(exports=""), "train.py": train}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU902",), preview=True)) == expected


def test_the_project_state_is_keyed_by_gpulints_code(tmp_path, monkeypatch):
    """`project-<key>.json` (hashes, context digests) is read without importing the analysis, so its key is
    gpulint's code rather than the summaries' FORMAT: any change to the code that makes a context gives a
    new key, and the digests of the old code are never trusted."""
    import gpulint.cache
    from gpulint.projects import Project

    root = copy_project("research", tmp_path)
    monkeypatch.chdir(root)
    files = sorted(root.rglob("*.py"))
    before = Project(files, Settings(root=root))
    paths_before = (before.state_path, before.summaries_path)
    monkeypatch.setattr(gpulint.cache, "_code_fingerprint", lambda: "another-build")
    after = Project(files, Settings(root=root))
    assert paths_before[0] != after.state_path and paths_before[1] != after.summaries_path
    assert after.state_path.name.startswith("project-") and after.summaries_path.name.startswith("summaries-")


def test_a_long_builder_chain_keeps_the_summary_small():
    # each method call on a call's result is tied to the result and the receiver: unbounded, a 40-call builder
    # chain (a Spark session's `.config(...)` lines) doubled the candidates at every call and never finished
    chain = "".join(f"        .config('key{i}', 'value')\n" for i in range(40))
    text = f"from pyspark.sql import SparkSession\n\n\ndef build():\n    return (SparkSession.builder\n{chain}        .getOrCreate())\n"
    calls = summarize(text).functions["build"].calls
    assert 0 < len(calls) <= 64


def test_methods_of_each_possible_instance_are_still_followed():
    text = textwrap.dedent(
        """
        from agents import A2C, PPO

        def run(use_ppo, batch):
            agent = PPO() if use_ppo else A2C()
            agent.learn(batch)
        """
    )
    refs = {call[0] for call in summarize(text).functions["run"].calls}
    assert {"PPO.learn", "A2C.learn"} <= refs
