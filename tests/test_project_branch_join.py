"""Names bound in both branches of an `if` (issue 14): the summaries join what every branch that goes on binds
(RepDistiller's `if opt.distill in ['crd']: train_loader, ... = get_sample_loaders(opt) else: ... = get_loaders(opt)`),
instead of keeping the branch read last; a branch that returns, raises, or runs only without a GPU is left out."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.analysis.summary import summarize
from tests.projects_helper import found, lint, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

TRAIN = """\
    import torch
    from data import get_sample_loaders, get_loaders


    def train(loader, model):
        opt = torch.optim.SGD(model.parameters(), 0.1)
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = model(x).sum()
            loss.backward()
            opt.step()


    def main(opt):
        if opt.distill in ["crd"]:
            train_loader, val_loader, n_data = get_sample_loaders(opt)
        else:
            train_loader, val_loader, n_data = get_loaders(opt)
        model = torch.nn.Linear(3, 3).cuda()
        train(train_loader, model)


    if __name__ == "__main__":
        main(None)
"""
DATA = """\
    from torch.utils.data import DataLoader


    def get_sample_loaders(opt):
        train_loader = DataLoader(opt.train_set, batch_size=64, shuffle=True, num_workers=0)
        val_loader = DataLoader(opt.val_set, batch_size=64, num_workers=0)
        return train_loader, val_loader, 10


    def get_loaders(opt):
        train_loader = DataLoader(opt.train_set, batch_size=64, shuffle=True, {workers})
        val_loader = DataLoader(opt.val_set, batch_size=64, num_workers=0)
        return train_loader, val_loader, 10
"""


def gpu102(tmp_path, monkeypatch, workers: str) -> list[str]:
    files = {"train.py": TRAIN, "data.py": DATA.replace("{workers}", workers)}
    return sorted(f for f in found(lint(write(tmp_path, files), monkeypatch)) if f.endswith("GPU102"))


def test_loaders_from_either_branch_are_found_at_each_dataloader(tmp_path, monkeypatch):
    # before: only the loader of the branch read last (data.py:11) was known to reach the GPU
    assert gpu102(tmp_path, monkeypatch, "num_workers=0") == ["data.py:11 GPU102", "data.py:5 GPU102"]


def test_a_candidate_without_the_problem_stays_silent(tmp_path, monkeypatch):
    assert gpu102(tmp_path, monkeypatch, "num_workers=4, pin_memory=True") == ["data.py:5 GPU102"]


def returns(source: str) -> dict:
    summary = summarize(textwrap.dedent(source))
    return {name: f.returns for name, f in summary.functions.items() if name != "<module>"}


def test_a_module_is_on_the_gpu_only_when_every_branch_puts_it_there():
    assert returns("""\
        import torch
        from torchvision.models import resnet18

        def both(args):
            if args.pretrained:
                model = resnet18().cuda()
            else:
                model = resnet18().to("cuda")
            return model

        def one_cpu(args):
            if args.pretrained:
                model = resnet18().cuda()
            else:
                model = resnet18()
            return model
    """) == {"both": [("gpu_module",)], "one_cpu": [("module",)]}


def test_branches_that_do_not_go_on_are_left_out():
    assert returns("""\
        import torch
        from torchvision.models import resnet18

        def no_gpu_branch():
            if torch.cuda.is_available():
                model = resnet18().cuda()
            else:
                model = resnet18()  # runs only without a GPU
            return model

        def early(gpu):
            model = resnet18().cuda()
            if not gpu:
                model = resnet18()
                return model
            return model

        def raises(gpu):
            model = resnet18().cuda()
            if not gpu:
                model = resnet18()
                raise SystemExit("no GPU")
            return model
    """) == {"no_gpu_branch": [("gpu_module",)], "early": [("module",), ("gpu_module",)], "raises": [("gpu_module",)]}


def test_a_device_or_the_cpu_by_a_flag_is_chosen_at_run_time():
    assert returns("""\
        import torch

        def dev(use):
            if use:
                device = torch.device("cuda")
            else:
                device = torch.device("cpu")
            return device
    """) == {"dev": [("device",)]}


def test_an_instance_of_one_of_several_classes_calls_the_method_of_each():
    summary = summarize(textwrap.dedent("""\
        from agents import PPO, A2C

        def run(algo, env):
            if algo == "ppo":
                agent = PPO(env)
            elif algo == "a2c":
                agent = A2C(env)
            for step in range(10):
                agent.update()
    """))
    # before: only `A2C.update`, the class bound last
    assert [c[0] for c in summary.functions["run"].calls] == ["PPO", "A2C", "PPO.update", "A2C.update"]


def test_a_name_both_branches_bind_alike_keeps_its_value():
    summary = summarize(textwrap.dedent("""\
        import torch

        if torch.distributed.is_initialized():
            net = torch.nn.Linear(2, 2).cuda()
        else:
            net = torch.nn.Linear(2, 2).cuda()
    """))
    assert summary.values["net"] == ("gpu_module",)


def test_a_model_placed_on_the_gpu_by_a_gpu_switch_is_on_the_gpu():
    # a test that picks the GPU: a GPU run takes the branch that moves the model (a device chosen at run time)
    assert returns("""\
        import torch
        from torchvision.models import resnet18
        from nets import Net

        def flag(args):
            model = resnet18()
            if args.cuda:
                model = model.cuda()
            return model

        def project_class(use_gpu):
            model = Net()
            if use_gpu:
                model.cuda()
            return model

        def other_switch(args):
            model = resnet18()
            if args.pretrained:
                model = model.cuda()
            return model
    """) == {"flag": [("gpu_module",)], "project_class": [("moved", ("src", "c:0"))], "other_switch": [("module",)]}


def test_none_in_one_branch_is_not_what_the_loops_take():
    # `eval_loader = None`, then `if run_validation: eval_loader = DataLoader(...)`: where a loop takes it, it is the loader
    assert returns("""\
        from torch.utils.data import DataLoader

        def make(cfg, data):
            eval_loader = None
            if cfg.run_validation:
                eval_loader = DataLoader(data, pin_memory=True)
            return eval_loader
    """) == {"make": [("loader", {"line": 6, "pin_memory": True})]}


AGENTS = """\
    import torch


    class PPO:
        def __init__(self, net):
            self.net = net
            self.opt = torch.optim.Adam(net.parameters())

        def update(self, batch):
            for _ in range(4):  # an epoch of its own per call
                loss = self.net(batch).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


    class A2C:
        def __init__(self, net):
            self.net = net
            self.opt = torch.optim.Adam(net.parameters())

        def update(self, batch):
            loss = self.net(batch).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return loss.item()
"""
MAIN = """\
    import torch
    from agents import PPO, A2C


    def main(algo, batches):
        net = torch.nn.Linear(4, 1).cuda()
        if algo == "a2c":
            agent = A2C(net)
        else:
            agent = PPO(net)
        for batch in batches:
            agent.update(batch.cuda())


    if __name__ == "__main__":
        main("a2c", [])
"""


def test_a_step_of_one_candidate_class_is_per_step_code(tmp_path, monkeypatch):
    # PPO's `update` runs an epoch of its own, A2C's one step: with `agent` an A2C the loop is a step loop
    # (before: only PPO, the class bound last, was followed, and A2C's `loss.item()` was not found)
    findings = found(lint(write(tmp_path, {"agents.py": AGENTS, "main.py": MAIN}), monkeypatch))
    assert "agents.py:27 GPU303" in findings


def test_a_cuda_device_set_in_one_branch_of_the_options_wins():
    returned = returns("""\
        import argparse
        import torch

        def options():
            parser = argparse.ArgumentParser()
            parser.add_argument("--cuda", action="store_true")
            parser.add_argument("--lr", default=0.1)
            args = parser.parse_args()
            if args.cuda:
                args.device = torch.device("cuda")
            else:
                args.device = torch.device("cpu")
            return args
    """)["options"]
    assert returned[0][0] == "args" and returned[0][1]["device"][0] == "cuda" and returned[0][1]["lr"][0] == 0.1


# joinfix: a factory that builds its training loader in both branches of `if validation_fraction is not None:`
# and returns one tuple or another by the same test (rasbt/stat453-deep-learning-ss21's helpers)
SPLIT_HELPER = """\
    from torch.utils.data import DataLoader


    def get_loaders(train_set, valid_set, test_set, validation_fraction=None):
        if validation_fraction is not None:
            valid_loader = DataLoader(valid_set, batch_size=64{valid})
            train_loader = DataLoader(train_set, batch_size=64, drop_last=True{train})
        else:
            train_loader = DataLoader(train_set, batch_size=64, shuffle=True{train})
        test_loader = DataLoader(test_set, batch_size=64, pin_memory=True)
        if validation_fraction is None:
            return train_loader, test_loader
        else:
            return train_loader, valid_loader, test_loader
"""
SPLIT_TRAIN = """\
    import torch
    from helper import get_loaders

    device = torch.device("cuda")
    model = torch.nn.Linear(3, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    train_loader, valid_loader, test_loader = get_loaders(None, None, None, validation_fraction=0.1)
    for epoch in range(10):
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            loss = model(x).sum()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for x, y in valid_loader:
                model(x.to(device))
"""


def split_findings(tmp_path, monkeypatch, train: str = "", valid: str = "") -> list[str]:
    files = {"helper.py": SPLIT_HELPER.replace("{train}", train).replace("{valid}", valid), "train.py": SPLIT_TRAIN}
    return sorted(f for f in found(lint(write(tmp_path, files), monkeypatch)) if f.endswith(("GPU102", "GPU105")))


def test_a_loader_built_in_both_branches_keeps_its_consumer_loops(tmp_path, monkeypatch):
    # before: the two `train_loader`s joined to unknown, so neither was tied to the loop that copies its batches
    # (the caller unpacks three loaders: the `train_loader` of the `else:` is never the one it takes)
    assert split_findings(tmp_path, monkeypatch) == ["helper.py:6 GPU102", "helper.py:7 GPU102"]


def test_a_loader_pinned_in_both_branches_stays_silent(tmp_path, monkeypatch):
    findings = split_findings(tmp_path, monkeypatch, train=", pin_memory=True", valid=", pin_memory=True")
    assert not [f for f in findings if f.endswith("GPU102")]
    assert "train.py:10 GPU105" in findings  # pinned in either branch: the caller's blocking copy is found


def test_loaders_of_two_branches_are_a_loader_with_what_both_say():
    returned = returns(SPLIT_HELPER.replace("{valid}", "").replace("{train}", ", num_workers=4"))["get_loaders"]
    assert returned[1] == (
        "tuple",
        (
            ("loader", {"line": 7, "batch_size": 64, "num_workers": 4, "shuffle": "?"}),
            ("loader", {"line": 6, "batch_size": 64}),
            ("loader", {"line": 10, "batch_size": 64, "pin_memory": True}),
        ),
    )


def test_a_pinned_loader_in_one_branch_only_is_not_known_pinned(tmp_path, monkeypatch):
    # one `train_loader` pinned, the other not: the caller's copies are not known to come from pinned memory (GPU105)
    helper = SPLIT_HELPER.replace("drop_last=True{train}", "drop_last=True, pin_memory=True")
    files = {"helper.py": helper.replace("{valid}", "").replace("{train}", ""), "train.py": SPLIT_TRAIN}
    findings = found(lint(write(tmp_path, files), monkeypatch))
    assert not [f for f in findings if f.startswith("train.py:10") and f.endswith("GPU105")]


def test_a_caller_that_takes_the_pair_reaches_the_loader_of_the_else(tmp_path, monkeypatch):
    train = SPLIT_TRAIN.replace("train_loader, valid_loader, test_loader = get_loaders(None, None, None, validation_fraction=0.1)",
                                "train_loader, test_loader = get_loaders(None, None, None)\n    valid_loader = test_loader")  # fmt: skip
    files = {"helper.py": SPLIT_HELPER.replace("{train}", "").replace("{valid}", ""), "train.py": train}
    assert sorted(f for f in found(lint(write(tmp_path, files), monkeypatch)) if f.endswith("GPU102")) == ["helper.py:9 GPU102"]
