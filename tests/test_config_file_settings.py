"""Loader settings a repository ships in config files (session 17, round 21: recall through config files).

- Hydra 0.11's `@hydra.main(config_path="conf/config.yaml")` names the primary file itself (no `config_name`); its
  defaults list merged each option file at the root (`training/cpc.yaml` writes `training:` itself), Hydra 1.1
  mounts it below its group: whichever place the option file writes the setting at is the one the read takes.
- `Wrapper(cfg["batch_size"], **cfg["dataset"])` of a YAML file loaded from a literal path: each entry of the
  section is a keyword of the constructor (`analysis/unpacked_settings.py`), so the `self.num_workers` it keeps
  has the values the shipped files write; a key the script stores at run time stays unknown.
- A loader factory returning `train, val, test` through a wrapper that returns them again: each element's batches
  are taken where the caller iterates that element only (the test loader iterated once is no epoch loader).
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

DATASET = """
import torch


class Frames(torch.utils.data.Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return torch.load(self.files[i])
"""

HYDRA_TRAIN = """
import hydra
import torch
from torch.utils.data import DataLoader

from data import Frames


@hydra.main(config_path="config/train.yaml")
def train_model(cfg):
    model = torch.nn.Linear(3, 3).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Frames(cfg.files), batch_size=64, shuffle=True, num_workers=cfg.training.n_workers, pin_memory=True)
    for epoch in range(cfg.training.n_epochs):
        for x in loader:
            loss = model(x.cuda(non_blocking=True)).sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    train_model()
"""

PRIMARY = """\
defaults:
    - training: cpc

files: ???
"""

CPC = """\
training:
    n_epochs: 200
    n_workers: 8
"""


def hydra_project(tmp_path, primary=PRIMARY, option=CPC, extra=None):
    files = {"data.py": DATASET, "train.py": HYDRA_TRAIN, "config/train.yaml": primary, "config/training/cpc.yaml": option}
    return write(tmp_path / "p", {**files, **(extra or {})})


def test_hydra_0_11_config_path_naming_the_primary_file_reads_its_option_files(tmp_path, monkeypatch):
    diagnostics = lint(hydra_project(tmp_path), monkeypatch)
    assert found(diagnostics) == ["train.py:13 GPU104"]
    assert diagnostics[0].message.startswith("`DataLoader` workers are shut down and started again for every pass of the loop at line 14")
    # the YAML may say 0 workers: the fix keeps that working
    assert diagnostics[0].fix.message == "Set `persistent_workers=cfg.training.n_workers > 0`"


def test_an_option_file_below_its_group_is_read_there(tmp_path, monkeypatch):
    option = "# @package _group_\nn_epochs: 200\nn_workers: 8\n"
    assert found(lint(hydra_project(tmp_path, option=option), monkeypatch)) == ["train.py:13 GPU104"]


def test_hydra_0_11_without_workers_is_silent(tmp_path, monkeypatch):
    root = hydra_project(tmp_path, option=CPC.replace("n_workers: 8", "n_workers: 0"))
    assert found(lint(root, monkeypatch)) == ["train.py:13 GPU101"]


def test_hydra_0_11_option_another_file_may_replace_stays_unknown(tmp_path, monkeypatch):
    # `training=vocoder` on the command line mounts another option with 0 workers: the count is not known
    root = hydra_project(tmp_path, extra={"config/training/vocoder.yaml": "training:\n    n_epochs: 10\n    n_workers: 0\n"})
    assert found(lint(root, monkeypatch)) == []


def test_an_option_file_writing_the_setting_at_both_places_stays_unknown(tmp_path, monkeypatch):
    option = CPC + "n_workers: 0\n"  # at the top (Hydra 1.0) and below the group (Hydra 1.1): which one is read?
    assert found(lint(hydra_project(tmp_path, option=option), monkeypatch)) == []


WRAPPER = """
import torch
from torch.utils.data import DataLoader

from data import Frames


class FramesWrapper(object):
    def __init__(self, batch_size, num_workers, valid_size, data_path, task):
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.valid_size = valid_size
        self.data_path = data_path
        self.task = task

    def get_data_loaders(self):
        dataset = Frames(open(self.data_path).read().split())
        train_loader, valid_loader, test_loader = self.split_loaders(dataset)
        return train_loader, valid_loader, test_loader

    def split_loaders(self, dataset):
        train_loader = DataLoader(dataset, batch_size=self.batch_size, num_workers=self.num_workers, pin_memory=True, drop_last=True)
        valid_loader = DataLoader(dataset, batch_size=self.batch_size, num_workers=self.num_workers, pin_memory=True)
        test_loader = DataLoader(dataset, batch_size=self.batch_size, num_workers=self.num_workers, pin_memory=True)
        return train_loader, valid_loader, test_loader
"""

FINETUNE = """
import torch
import yaml

from dataset.wrapper import FramesWrapper


class FineTune(object):
    def __init__(self, dataset, config):
        self.dataset = dataset
        self.config = config
        self.device = torch.device("cuda")

    def train(self):
        train_loader, valid_loader, test_loader = self.dataset.get_data_loaders()
        model = torch.nn.Linear(3, 3).to(self.device)
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(self.config["epochs"]):
            for x in train_loader:
                x = x.to(self.device, non_blocking=True)
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            self.validate(model, valid_loader)
        self.validate(model, test_loader)

    def validate(self, model, loader):
        with torch.no_grad():
            for x in loader:
                model(x.to(self.device, non_blocking=True))


def main(config):
    dataset = FramesWrapper(config["batch_size"], **config["dataset"])
    fine_tune = FineTune(dataset, config)
    fine_tune.train()


if __name__ == "__main__":
    config = yaml.load(open("config_finetune.yaml", "r"), Loader=yaml.FullLoader)
    if config["task_name"] == "frames":
        config["dataset"]["task"] = "classification"
        config["dataset"]["data_path"] = "data/frames.txt"
    main(config)
"""

FINETUNE_CONFIG = """\
batch_size: 32
epochs: 100
task_name: frames
dataset:
  num_workers: 4
  valid_size: 0.1
"""


def wrapper_project(tmp_path, finetune=FINETUNE, config=FINETUNE_CONFIG, extra=None):
    files = {"data.py": DATASET, "dataset/__init__.py": "", "dataset/wrapper.py": WRAPPER, "finetune.py": finetune, "config_finetune.yaml": config}
    return write(tmp_path / "p", {**files, **(extra or {})})


def test_a_yaml_section_unpacked_into_a_constructor_gives_its_workers(tmp_path, monkeypatch):
    diagnostics = lint(wrapper_project(tmp_path), monkeypatch)
    assert found(diagnostics) == ["dataset/wrapper.py:22 GPU104", "dataset/wrapper.py:23 GPU104"]
    train, valid = diagnostics
    assert train.message.startswith("`DataLoader` workers are shut down and started again for every pass of the loop at finetune.py:18 (its batches are taken at finetune.py:19)")
    assert valid.message.startswith("`DataLoader` workers are shut down and started again for every pass of the loop at finetune.py:18 (its batches are taken at finetune.py:30)")
    assert train.fix.message == "Set `persistent_workers=self.num_workers > 0`"  # the YAML may say 0


def test_every_shipped_file_beside_it_counts(tmp_path, monkeypatch):
    # another config file shipped beside it gives 8 workers: above 0 either way
    extra = {"config.yaml": "batch_size: 512\ndataset:\n  num_workers: 8\n  valid_size: 0.05\n"}
    assert found(lint(wrapper_project(tmp_path, extra=extra), monkeypatch)) == ["dataset/wrapper.py:22 GPU104", "dataset/wrapper.py:23 GPU104"]
    extra = {"config.yaml": "batch_size: 512\ndataset:\n  num_workers: 0\n  valid_size: 0.05\n"}
    assert found(lint(wrapper_project(tmp_path, extra=extra), monkeypatch)) == []


def test_no_workers_in_the_section_is_silent(tmp_path, monkeypatch):
    root = wrapper_project(tmp_path, config=FINETUNE_CONFIG.replace("num_workers: 4", "num_workers: 0"))
    assert found(lint(root, monkeypatch)) == []


def test_a_key_the_script_stores_stays_unknown(tmp_path, monkeypatch):
    finetune = FINETUNE.replace('config["dataset"]["task"] = "classification"', 'config["dataset"]["num_workers"] = 0')
    assert found(lint(wrapper_project(tmp_path, finetune=finetune), monkeypatch)) == []


def test_a_config_updated_at_run_time_stays_unknown(tmp_path, monkeypatch):
    finetune = FINETUNE.replace("    main(config)", "    config.update(yaml.safe_load(open(sys.argv[1])))\n    main(config)")
    assert found(lint(wrapper_project(tmp_path, finetune=finetune), monkeypatch)) == []


def test_a_path_chosen_at_run_time_stays_unknown(tmp_path, monkeypatch):
    finetune = FINETUNE.replace('open("config_finetune.yaml", "r")', "open(sys.argv[1])")
    assert found(lint(wrapper_project(tmp_path, finetune=finetune), monkeypatch)) == []


def test_a_script_another_module_imports_stays_unknown(tmp_path, monkeypatch):
    extra = {"sweep.py": "from finetune import main\n\nmain({'batch_size': 8, 'dataset': {'num_workers': 0}})\n"}
    assert found(lint(wrapper_project(tmp_path, extra=extra), monkeypatch)) == []


GROUPED = HYDRA_TRAIN.replace("batch_size=64", "batch_size=cfg.training.n_speakers").replace(
    "            loss = model(x.cuda(non_blocking=True)).sum()",
    "            x = x.cuda(non_blocking=True).view(cfg.training.n_speakers * cfg.training.n_utterances, 3)\n            loss = model(x).sum()",
)


def test_items_folded_into_the_batch_are_no_small_batch(tmp_path, monkeypatch):
    # each item holds one speaker's 8 utterances: the GPU's batch is 8 x 8 = 64, not the 8 `batch_size` says
    option = CPC + "    n_speakers: 8\n    n_utterances: 8\n"
    root = write(tmp_path / "p", {"data.py": DATASET, "train.py": GROUPED, "config/train.yaml": PRIMARY, "config/training/cpc.yaml": option})
    assert found(lint(root, monkeypatch)) == ["train.py:13 GPU104"]


def test_a_small_batch_reshaped_otherwise_is_still_small(tmp_path, monkeypatch):
    option = CPC + "    n_speakers: 8\n    n_utterances: 8\n"
    grouped = GROUPED.replace("view(cfg.training.n_speakers * cfg.training.n_utterances, 3)", "view(-1, 3)")
    root = write(tmp_path / "p", {"data.py": DATASET, "train.py": grouped, "config/train.yaml": PRIMARY, "config/training/cpc.yaml": option})
    assert found(lint(root, monkeypatch)) == ["train.py:13 GPU103", "train.py:13 GPU104"]
