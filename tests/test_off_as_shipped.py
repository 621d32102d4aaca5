"""Code behind a setting that is off as the project ships it (issue 13): a parameter every call in the project
leaves at its default (`ComputeLoss(model)` with `autobalance=False`, `evaluate(...)` with `criterion=None`), a
diagnostic command-line switch off by default (`--debug`, `--profile`, parsed here or in another module), and
DDP accumulation whose count is 1 as shipped. Minimal multi-file projects of our own, after the fifth and sixth
corpora (a detector's loss classes, a k-NN evaluation helper); each silenced shape has its negative."""

from __future__ import annotations

from tests.projects_helper import lint_written

LOSS = """\
    import torch


    class Trainer:
        def __init__(self, model, optimizer, log_losses=False):
            self.model, self.optimizer, self.log_losses = model.cuda(), optimizer, log_losses

        def fit(self, loader):
            for imgs, targets in loader:
                imgs, targets = imgs.cuda(), targets.cuda()
                loss = torch.nn.functional.cross_entropy(self.model(imgs), targets)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                if self.log_losses:
                    print(loss.item())
"""
TRAIN = """\
    import torch

    from utils.loss import Trainer


    def main(model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        Trainer(model, optimizer{extra}).fit(loader)
"""
LOSS_FINDING = "utils/loss.py:16 GPU303"


def _loss_project(tmp_path, monkeypatch, extra: str = "", more: dict | None = None) -> list[str]:
    files = {"utils/__init__.py": "", "utils/loss.py": LOSS, "train.py": TRAIN.format(extra=extra), **(more or {})}
    return lint_written(tmp_path, files, monkeypatch)


def test_a_branch_on_a_constructor_default_no_construction_changes_is_silent(tmp_path, monkeypatch):
    assert LOSS_FINDING not in _loss_project(tmp_path, monkeypatch)


def test_a_construction_that_passes_the_default_literal_is_silent_too(tmp_path, monkeypatch):
    assert LOSS_FINDING not in _loss_project(tmp_path, monkeypatch, ", log_losses=False")


def test_a_construction_with_true_keeps_the_finding(tmp_path, monkeypatch):
    assert LOSS_FINDING in _loss_project(tmp_path, monkeypatch, ", True")


def test_a_construction_with_a_value_chosen_at_run_time_keeps_the_finding(tmp_path, monkeypatch):
    assert LOSS_FINDING in _loss_project(tmp_path, monkeypatch, ", log_losses=len(loader) > 1")


def test_a_second_construction_with_true_elsewhere_keeps_the_finding(tmp_path, monkeypatch):
    other = "from utils.loss import Trainer\n\n\ndef tune(model):\n    return Trainer(model, None, log_losses=True)\n"
    assert LOSS_FINDING in _loss_project(tmp_path, monkeypatch, more={"tune.py": other})


def test_a_class_handed_on_as_a_value_keeps_the_finding(tmp_path, monkeypatch):
    other = "from functools import partial\n\nfrom utils.loss import Trainer\n\nTRAINERS = {'plain': Trainer}\n"
    assert LOSS_FINDING in _loss_project(tmp_path, monkeypatch, more={"registry.py": other})


def test_the_attribute_set_from_outside_keeps_the_finding(tmp_path, monkeypatch):
    other = "def enable(trainer):\n    trainer.log_losses = True\n"
    assert LOSS_FINDING in _loss_project(tmp_path, monkeypatch, more={"tweak.py": other})


def test_a_class_nobody_builds_is_api_and_keeps_the_finding(tmp_path, monkeypatch):
    files = {"utils/__init__.py": "", "utils/loss.py": LOSS}
    assert LOSS_FINDING in lint_written(tmp_path, files, monkeypatch)


EVAL_UTILS = """\
    import torch


    @torch.no_grad()
    def evaluate(model, data_loader, device, criterion=None):
        model.eval()
        for samples, targets in data_loader:
            outputs = model(samples.to(device))
            targets = targets.to(device)
            if criterion is not None:
                loss = criterion(outputs, targets)
                print(loss.item())
"""
KNN = """\
    import torch

    from eval.utils import evaluate


    def run(model, loader):
        device = torch.device("cuda")
        return evaluate(model.to(device), loader, device{extra})
"""


def test_a_branch_on_a_parameter_no_call_passes_is_silent(tmp_path, monkeypatch):
    files = {"eval/__init__.py": "", "eval/utils.py": EVAL_UTILS, "knn.py": KNN.format(extra="")}
    assert not [f for f in lint_written(tmp_path, files, monkeypatch) if f.startswith("eval/utils.py:12")]


def test_a_call_that_passes_a_criterion_keeps_the_finding(tmp_path, monkeypatch):
    files = {"eval/__init__.py": "", "eval/utils.py": EVAL_UTILS, "knn.py": KNN.format(extra=", torch.nn.CrossEntropyLoss()")}
    assert "eval/utils.py:12 GPU303" in lint_written(tmp_path, files, monkeypatch)


OPTIONS = """\
    import argparse


    def get_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", type=int, default=10)
        parser.add_argument("--{flag}", action="store_true"{default})
        {set_defaults}
        return parser.parse_args()
"""
MAIN = """\
    import torch
    import torchvision

    from options import get_args


    def main(loader):
        args = get_args()
        model = torchvision.models.resnet50().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.{flag}:
                print(loss.item())


    if __name__ == "__main__":
        main([])
"""
MAIN_FINDING = "main.py:17 GPU303"


def _flag_project(tmp_path, monkeypatch, flag="debug", default="", set_defaults="", more=None) -> list[str]:
    files = {
        "options.py": OPTIONS.format(flag=flag, default=default, set_defaults=set_defaults),
        "main.py": MAIN.format(flag=flag),
        **(more or {}),
    }
    return lint_written(tmp_path, files, monkeypatch)


def test_a_debug_switch_parsed_in_another_module_is_off_as_shipped(tmp_path, monkeypatch):
    assert MAIN_FINDING not in _flag_project(tmp_path, monkeypatch)


def test_a_profiling_switch_with_default_false_is_off_as_shipped(tmp_path, monkeypatch):
    assert MAIN_FINDING not in _flag_project(tmp_path, monkeypatch, flag="enable_profiling", default=", default=False")


def test_a_switch_on_by_default_keeps_the_finding(tmp_path, monkeypatch):
    assert MAIN_FINDING in _flag_project(tmp_path, monkeypatch, default=", default=True")


def test_a_switch_turned_on_by_set_defaults_keeps_the_finding(tmp_path, monkeypatch):
    assert MAIN_FINDING in _flag_project(tmp_path, monkeypatch, set_defaults="parser.set_defaults(debug=True)")


def test_a_switch_a_shell_script_passes_keeps_the_finding(tmp_path, monkeypatch):
    script = {"run.sh": "python main.py --epochs 90 --debug\n"}
    assert MAIN_FINDING in _flag_project(tmp_path, monkeypatch, more=script)


def test_a_switch_a_readme_command_passes_keeps_the_finding(tmp_path, monkeypatch):
    readme = {"README.md": "Train with\n\n    python main.py --debug\n"}
    assert MAIN_FINDING in _flag_project(tmp_path, monkeypatch, more=readme)


def test_a_switch_that_selects_the_gpu_path_keeps_the_finding(tmp_path, monkeypatch):
    assert MAIN_FINDING in _flag_project(tmp_path, monkeypatch, flag="cuda")


def test_an_amp_switch_keeps_the_finding(tmp_path, monkeypatch):
    assert MAIN_FINDING in _flag_project(tmp_path, monkeypatch, flag="amp")


SCRIPT = """\
    import argparse

    import torch
    import torchvision

    parser = argparse.ArgumentParser()
    parser.add_argument("--vis", action="store_true", help="plot the loss")
    args = parser.parse_args()
    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torchvision.datasets.FakeData(transform=torchvision.transforms.ToTensor()), batch_size=64)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if args.vis:
            print(loss.item())
"""


def test_a_visualisation_switch_parsed_in_the_same_script_is_off_as_shipped(tmp_path, monkeypatch):
    assert "train.py:18 GPU303" not in lint_written(tmp_path, {"train.py": SCRIPT}, monkeypatch)


def test_the_same_script_with_a_plain_loss_print_keeps_the_finding(tmp_path, monkeypatch):
    plain = SCRIPT.replace("        if args.vis:\n            print", "        print").replace("            print", "        print")
    assert "train.py:17 GPU303" in lint_written(tmp_path, {"train.py": plain}, monkeypatch)


DDP = """\
    import argparse

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    parser = argparse.ArgumentParser()
    parser.add_argument("--accumulation_steps", type=int, default={steps})
    args = parser.parse_args()


    def train(loader):
        model = DDP(torch.nn.Linear(8, 2).cuda())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
            loss.backward()
            if (i + 1) % args.accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


def test_ddp_accumulation_with_a_count_of_one_as_shipped_is_silent(tmp_path, monkeypatch):
    assert not [f for f in lint_written(tmp_path, {"train.py": DDP.format(steps=1)}, monkeypatch) if "GPU406" in f]


def test_ddp_accumulation_with_a_default_of_four_is_found(tmp_path, monkeypatch):
    assert "train.py:16 GPU406" in lint_written(tmp_path, {"train.py": DDP.format(steps=4)}, monkeypatch)


def test_ddp_accumulation_a_job_script_raises_is_found(tmp_path, monkeypatch):
    files = {"train.py": DDP.format(steps=1), "run_ddp.sh": "torchrun train.py --accumulation_steps 8\n"}
    assert "train.py:16 GPU406" in lint_written(tmp_path, files, monkeypatch)


def test_a_decorated_function_may_be_called_with_other_arguments(tmp_path, monkeypatch):
    decorated = EVAL_UTILS.replace("@torch.no_grad()", "@register_evaluator").replace(
        "    import torch\n", "    import torch\n\n    from registry import register_evaluator\n"
    )
    files = {"eval/__init__.py": "", "eval/utils.py": decorated, "knn.py": KNN.format(extra=""), "registry.py": "def register_evaluator(f):\n    return f\n"}
    assert "eval/utils.py:14 GPU303" in lint_written(tmp_path, files, monkeypatch)


COPIED = """\
    import argparse

    import torch
    import torchvision


    def get_main_loop(config, model, optimizer):
        def main_loop(loader):
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if config["enable_tensorboard"]:
                    print(loss.item())
        return main_loop


    def get_training_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--enable_tensorboard", action="store_true", help="enable tensorboard logging")
        args = parser.parse_args()
        training_config = dict()
        for arg in vars(args):
            training_config[arg] = getattr(args, arg)
        {extra}
        return training_config


    if __name__ == "__main__":
        model = torchvision.models.resnet50().cuda()
        get_main_loop(get_training_args(), model, torch.optim.SGD(model.parameters(), lr=0.1))([])
"""


def test_a_switch_copied_into_a_config_dict_is_off_as_shipped(tmp_path, monkeypatch):
    assert "train.py:15 GPU303" not in lint_written(tmp_path, {"train.py": COPIED.format(extra="")}, monkeypatch)


def test_a_config_dict_that_turns_the_switch_on_keeps_the_finding(tmp_path, monkeypatch):
    source = COPIED.format(extra='training_config["enable_tensorboard"] = True')
    assert "train.py:15 GPU303" in lint_written(tmp_path, {"train.py": source}, monkeypatch)


def test_a_dict_literal_that_sets_the_switch_keeps_the_finding(tmp_path, monkeypatch):
    source = COPIED.format(extra='training_config.update({"enable_tensorboard": True})')
    assert "train.py:15 GPU303" in lint_written(tmp_path, {"train.py": source}, monkeypatch)


def test_a_command_file_edited_later_re_checks_the_module_that_reads_the_switch(tmp_path, monkeypatch):
    from tests.projects_helper import found, lint, write

    files = {"options.py": OPTIONS.format(flag="debug", default="", set_defaults=""), "main.py": MAIN.format(flag="debug")}
    write(tmp_path, {**files, "run.sh": "python main.py --epochs 90\n"})
    assert MAIN_FINDING not in found(lint(tmp_path, monkeypatch, use_cache=True))
    write(tmp_path, {"run.sh": "python main.py --epochs 90 --debug\n"})
    assert MAIN_FINDING in found(lint(tmp_path, monkeypatch, use_cache=True))
