"""Facts that cross modules, found missing on the third held-out corpus (docs/precision.md, section xmod2):
convolutional networks defined in a model module, a settings object that carries the device, a loader
returned with the default collate_fn, dicts filled with per-step losses, Lightning 1.x set-ups."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

ALL = {"select": ("ALL",), "preview": True}


def codes(tmp_path, monkeypatch, files: dict[str, str], code: str) -> list[str]:
    return sorted(f for f in found(lint(write(tmp_path, files), monkeypatch, **ALL)) if f.endswith(code))


# ---- a convolutional network defined in another module (GPU903) ------------------------------------------

CONV_MODELS = """\
    from torch import nn


    class NetG(nn.Module):
        def __init__(self, nz):
            super().__init__()
            self.main = nn.Sequential(nn.ConvTranspose2d(nz, 64, 4), nn.ReLU(True))

        def forward(self, x):
            return self.main(x)


    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            return self.conv(x)


    def make_features(c):
        layers = []
        for _ in range(4):
            layers.append(Block(c))
        return nn.Sequential(*layers)


    class NetD(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.features = make_features(c)
            self.head = nn.Linear(c, 1)

        def forward(self, x):
            return self.head(self.features(x).mean((2, 3)))
"""
LINEAR_MODELS = """\
    from torch import nn


    class NetG(nn.Module):
        def __init__(self, nz):
            super().__init__()
            self.main = nn.Sequential(nn.Linear(nz, 64), nn.ReLU(True), nn.Linear(64, 784))

        def forward(self, x):
            return self.main(x)


    class NetD(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.head = nn.Linear(784, 1)

        def forward(self, x):
            return self.head(x)
"""
# a metric helper that runs a conv net of its own (an FID's Inception) and returns a number, not a model
FID = """\
    import torch
    from torch import nn


    def fid_score(images):
        inception = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten()).cuda()
        return inception(images).mean().item()
"""
GAN_TRAIN = """\
    import torch
    from model import NetG, NetD
    from fid import fid_score


    def train(loader, epochs):
        device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        netg, netd = NetG(100), NetD(64)
        netd.to(device)
        netg.to(device)
        opt_d = torch.optim.SGD(netd.parameters(), lr=2e-4)
        for epoch in range(epochs):
            for img in loader:
                img = img.to(device)
                loss = netd(img).mean() - netd(netg(torch.randn(64, 100, device=device))).mean()
                opt_d.zero_grad()
                loss.backward()
                opt_d.step()
            print(fid_score(img))


    if __name__ == "__main__":
        train([], 10)
"""


def test_a_convolutional_model_class_of_another_module_is_a_conv_net_on_cuda(tmp_path, monkeypatch):
    files = {"model.py": CONV_MODELS, "fid.py": FID, "train.py": GAN_TRAIN}
    # at the first move of a model to CUDA (`netd, netg = ...` unpacked: each name is its own model)
    assert codes(tmp_path, monkeypatch, files, "GPU903") == ["train.py:9 GPU903"]


def test_linear_models_of_another_module_and_a_conv_net_inside_a_metric_helper_are_not(tmp_path, monkeypatch):
    files = {"model.py": LINEAR_MODELS, "fid.py": FID, "train.py": GAN_TRAIN}
    found_codes = codes(tmp_path, monkeypatch, files, "GPU903")
    assert found_codes == []  # the FID helper builds a conv net, but returns a score: the trained model is linear
    assert "train.py:9 GPU902" in found(lint(tmp_path, monkeypatch, **ALL))  # still a CUDA training script


def test_a_factory_that_returns_a_conv_net_and_a_base_class_that_builds_one(tmp_path, monkeypatch):
    files = {
        "backbone.py": """\
            import torchvision
            from torch import nn


            def build_backbone():
                return torchvision.models.resnet18()


            class Base(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.stem = nn.Conv2d(3, 16, 3)
                    self.mid = nn.Conv2d(16, 16, 3)
                    self.head = nn.Conv2d(16, 16, 1)
        """,
        "nets.py": """\
            from torch import nn
            from backbone import Base


            class Classifier(Base):
                def forward(self, x):
                    return self.head(self.mid(self.stem(x))).mean()
        """,
        "train_a.py": """\
            import torch
            from backbone import build_backbone


            def main(loader):
                model = build_backbone().cuda()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                    opt.zero_grad()
                    loss.backward()
                    opt.step()


            if __name__ == "__main__":
                main([])
        """,
        "train_b.py": """\
            import torch
            from nets import Classifier


            def main(loader):
                model = Classifier().cuda()
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                for x in loader:
                    loss = model(x.cuda())
                    opt.zero_grad()
                    loss.backward()
                    opt.step()


            if __name__ == "__main__":
                main([])
        """,
    }
    assert codes(tmp_path, monkeypatch, files, "GPU903") == ["train_a.py:6 GPU903", "train_b.py:6 GPU903"]


def test_a_transformer_whose_only_convolution_is_its_patch_embedding_is_not_a_conv_net(tmp_path, monkeypatch):
    vit = """\
        from torch import nn


        class ResNetStem(nn.Module):
            def __init__(self, width):
                super().__init__()
                self.body = nn.Sequential(*[nn.Conv2d(width, width, 3) for _ in range(8)])


        class Embeddings(nn.Module):
            def __init__(self, hidden, hybrid=False):
                super().__init__()
                if hybrid:  # the hybrid variant, for some settings only
                    self.hybrid_model = ResNetStem(64)
                self.patch_embeddings = nn.Conv2d(3, hidden, 16, stride=16)


        class VisionTransformer(nn.Module):
            def __init__(self, hidden, depth):
                super().__init__()
                self.embeddings = Embeddings(hidden)
                self.blocks = nn.ModuleList([nn.TransformerEncoderLayer(hidden, 8) for _ in range(depth)])
    """
    train = GAN_TRAIN.replace("from model import NetG, NetD", "from vit import VisionTransformer").replace(
        "netg, netd = NetG(100), NetD(64)", "netg, netd = VisionTransformer(768, 12), VisionTransformer(768, 12)"
    )
    assert codes(tmp_path, monkeypatch, {"vit.py": vit, "fid.py": FID, "train.py": train}, "GPU903") == []


def test_a_two_convolution_toy_net_of_another_module_is_not_a_conv_net(tmp_path, monkeypatch):
    # the CIFAR tutorial's net: two small convolutions, the autotuner buys next to nothing
    toy = """\
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(3, 6, 5)
                self.conv2 = nn.Conv2d(6, 16, 5)
                self.fc = nn.Linear(16 * 5 * 5, 10)
    """
    train = GAN_TRAIN.replace("from model import NetG, NetD", "from model import Net").replace(
        "netg, netd = NetG(100), NetD(64)", "netg, netd = Net(), Net()"
    )
    assert codes(tmp_path, monkeypatch, {"model.py": toy, "fid.py": FID, "train.py": train}, "GPU903") == []


def test_cudnn_benchmark_set_in_the_script_stays_silent(tmp_path, monkeypatch):
    train = GAN_TRAIN.replace("    import torch\n", "    import torch\n    torch.backends.cudnn.benchmark = True\n", 1)
    findings = found(lint(write(tmp_path, {"model.py": CONV_MODELS, "fid.py": FID, "train.py": train}), monkeypatch, **ALL))
    # GPU901 stays (bf16 speeds convolutions); GPU902 does not report a conv net (its convolutions use TF32 already)
    assert "train.py:18 GPU901" in findings and not [f for f in findings if "GPU903" in f or "GPU902" in f]


# ---- a settings object of another module that carries the device -----------------------------------------

CONFIG = """\
    import torch as t


    class DefaultConfig(object):
        batch_size = 32
        use_gpu = True
        num_workers = 4

        def parse(self, kwargs):
            for k, v in kwargs.items():
                setattr(self, k, v)
            opt.device = t.device("cuda") if opt.use_gpu else t.device("cpu")


    opt = DefaultConfig()
"""
CPU_CONFIG = """\
    class DefaultConfig(object):
        batch_size = 32
        device = "cpu"

        def parse(self, kwargs):
            for k, v in kwargs.items():
                setattr(self, k, v)


    opt = DefaultConfig()
"""
CONFIG_MAIN = """\
    import torch as t
    from torch.utils.data import DataLoader
    from config import opt


    def train(dataset, model, **kwargs):
        opt.parse(kwargs)
        model.to(opt.device)
        loader = DataLoader(dataset, opt.batch_size, shuffle=True)
        optimizer = t.optim.SGD(model.parameters(), lr=0.1)
        for data, label in loader:
            data = data.to(opt.device)
            label = label.to(opt.device)
            loss = t.nn.functional.cross_entropy(model(data), label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())
"""


def test_a_device_from_a_settings_object_that_picks_cuda_makes_the_script_gpu_code(tmp_path, monkeypatch):
    findings = sorted(found(lint(write(tmp_path, {"config.py": CONFIG, "main.py": CONFIG_MAIN}), monkeypatch)))
    assert findings == ["main.py:18 GPU303", "main.py:9 GPU101", "main.py:9 GPU102"]


def test_a_settings_object_whose_module_names_no_gpu_says_nothing(tmp_path, monkeypatch):
    assert found(lint(write(tmp_path, {"config.py": CPU_CONFIG, "main.py": CONFIG_MAIN}), monkeypatch)) == []


# ---- a pinned loader returned by a data module, its whole batches copied (GPU105) -------------------------

DATA_LOADER = """\
    from torch.utils import data


    def get_eval_loader(root, batch_size=32, num_workers=4):
        dataset = ImageFolder(root)
        return data.DataLoader(dataset=dataset, batch_size=batch_size, num_workers=num_workers, pin_memory=True{collate})
"""
EVAL = """\
    import torch
    from tqdm import tqdm
    from core.data_loader import get_eval_loader


    @torch.no_grad()
    def calculate_metrics(nets, args, domains):
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        for src in domains:
            loader_src = get_eval_loader(root=src, batch_size=args.val_batch_size)
            for i, x_src in enumerate(tqdm(loader_src, total=len(loader_src))):
                x_src = x_src.to(device)
                out = nets.generator(x_src)
"""


def test_whole_batches_of_a_returned_pinned_loader_with_the_default_collate_are_blocking_copies(tmp_path, monkeypatch):
    files = {"core/__init__.py": "", "core/data_loader.py": DATA_LOADER.format(collate=""), "metrics/eval.py": EVAL}
    diagnostics = lint(write(tmp_path, files), monkeypatch, select=("GPU105",))
    assert found(diagnostics) == ["metrics/eval.py:12 GPU105"]
    assert "(core/data_loader.py:6)" in diagnostics[0].message


def test_whole_batches_of_a_returned_loader_with_a_custom_collate_fn_are_left_alone(tmp_path, monkeypatch):
    # a custom collate_fn may build a batch type whose `.to()` takes no `non_blocking`
    loader = DATA_LOADER.format(collate=", collate_fn=collate_graphs")
    files = {"core/__init__.py": "", "core/data_loader.py": loader, "metrics/eval.py": EVAL}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU105",))) == []


# ---- a dict filled with the step's losses, reduced by a helper of another module (GPU303) -----------------

DISTRIBUTED = """\
    import torch
    import torch.distributed as dist


    def get_world_size():
        if not dist.is_available() or not dist.is_initialized():
            return 1
        return dist.get_world_size()


    def reduce_loss_dict(loss_dict):
        world_size = get_world_size()
        if world_size < 2:
            return loss_dict
        with torch.no_grad():
            keys, losses = [], []
            for k in sorted(loss_dict.keys()):
                keys.append(k)
                losses.append(loss_dict[k])
            losses = torch.stack(losses, 0)
            dist.reduce(losses, dst=0)
            reduced = {k: v for k, v in zip(keys, losses)}
        return reduced
"""
GAN_STEPS = """\
    import torch
    from distributed import reduce_loss_dict


    def train(loader, generator, discriminator, d_optim, device, log_every):
        loss_dict = {}
        for i, real in enumerate(loader):
            real = real.to(device)
            fake = generator(torch.randn(real.size(0), 512, device=device))
            d_loss = discriminator(fake).mean() - discriminator(real).mean()
            loss_dict["d"] = d_loss
            loss_dict["lr"] = d_optim.param_groups[0]["lr"]
            d_optim.zero_grad()
            d_loss.backward()
            d_optim.step()
            loss_reduced = reduce_loss_dict(loss_dict)
            d_loss_val = loss_reduced["d"].mean().item()
            lr = float(loss_dict["lr"])
            if i % log_every == 0:
                print(loss_dict["d"].item(), lr, d_loss_val)


    if __name__ == "__main__":
        device = "cuda"
        g = torch.nn.Linear(512, 8).to(device)
        d = torch.nn.Linear(8, 1).to(device)
        train([], g, d, torch.optim.Adam(d.parameters()), device, 100)
"""


def test_items_of_a_dict_of_step_losses_are_gpu_tensors_through_a_reducing_helper(tmp_path, monkeypatch):
    files = {"distributed.py": DISTRIBUTED, "train.py": GAN_STEPS}
    # the learning rate stored under "lr" is a Python float; the read under an interval guard is not per step
    assert codes(tmp_path, monkeypatch, files, "GPU303") == ["train.py:17 GPU303"]


def test_a_dict_that_is_not_filled_here_stays_unknown(tmp_path, monkeypatch):
    train = GAN_STEPS.replace("    loss_dict = {}\n", "    loss_dict = make_dict()\n").replace(
        '            loss_dict["d"] = d_loss\n', ""
    )
    assert codes(tmp_path, monkeypatch, {"distributed.py": DISTRIBUTED, "train.py": train}, "GPU303") == []


# ---- Lightning 1.x: Trainer.from_argparse_args, hooks bound in __init__, submodules' optimizers -----------

LIGHTNING_MAIN = """\
    import argparse
    import pytorch_lightning as pl
    from pytorch_lightning.trainer import Trainer
    from torch.utils.data import DataLoader


    class DataModuleFromConfig(pl.LightningDataModule):
        def __init__(self, batch_size, train=None, validation=None, num_workers=8):
            super().__init__()
            self.batch_size = batch_size
            self.num_workers = num_workers
            self.datasets = {{}}
            if train is not None:
                self.datasets["train"] = train
                self.train_dataloader = self._train_dataloader
            if validation is not None:
                self.datasets["validation"] = validation
                self.val_dataloader = self._val_dataloader

        def _train_dataloader(self):
            return DataLoader(self.datasets["train"], batch_size=self.batch_size, num_workers=self.num_workers, shuffle=True{pin})

        def _val_dataloader(self):
            return DataLoader(self.datasets["validation"], batch_size=self.batch_size, num_workers=self.num_workers{pin})


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser = Trainer.add_argparse_args(parser)
        opt = parser.parse_args()
        trainer = Trainer.from_argparse_args(opt)
        data = DataModuleFromConfig(16, train=[], validation=[])
        trainer.fit(build_model(), data)
"""
VQGAN = """\
    import torch
    import pytorch_lightning as pl
    from torch import nn


    class VQModel(pl.LightningModule):
        def __init__(self, lr):
            super().__init__()
            self.encoder = nn.Linear(8, 8)
            self.decoder = nn.Linear(8, 8)
            self.learning_rate = lr

        def configure_optimizers(self):
            opt_ae = torch.optim.Adam(list(self.encoder.parameters()) + list(self.decoder.parameters()), lr=self.learning_rate)
            param_dict = {pn: p for pn, p in self.decoder.named_parameters()}
            groups = [{"params": [param_dict[pn] for pn in sorted(param_dict)], "weight_decay": 0.01}]
            opt_groups = torch.optim.AdamW(groups, lr=self.learning_rate)
            return [opt_ae, opt_groups], []
"""
PLAIN_MODEL = VQGAN.replace("pl.LightningModule", "nn.Module").replace("    import pytorch_lightning as pl\n", "")


def test_a_trainer_built_from_argparse_feeds_the_loaders_of_hooks_bound_in_init(tmp_path, monkeypatch):
    files = {"main.py": LIGHTNING_MAIN.format(pin="")}
    assert codes(tmp_path, monkeypatch, files, "GPU102") == ["main.py:21 GPU102", "main.py:24 GPU102"]


def test_pinned_loaders_of_bound_hooks_stay_silent(tmp_path, monkeypatch):
    files = {"main.py": LIGHTNING_MAIN.format(pin=", pin_memory=True, persistent_workers=True")}
    assert codes(tmp_path, monkeypatch, files, "GPU102") == []


def test_adam_over_submodules_of_a_lightning_module_updates_cuda_parameters(tmp_path, monkeypatch):
    assert codes(tmp_path, monkeypatch, {"vqgan.py": VQGAN}, "GPU904") == ["vqgan.py:14 GPU904", "vqgan.py:17 GPU904"]


def test_adam_over_submodules_of_a_plain_module_is_not_known_to_be_on_cuda(tmp_path, monkeypatch):
    findings = found(lint(write(tmp_path, {"model.py": PLAIN_MODEL}), monkeypatch, **ALL))
    assert findings == []  # (parses: no syntax error reported)


def test_adam_over_a_submodule_a_plain_class_moves_to_cuda_itself(tmp_path, monkeypatch):
    moved = PLAIN_MODEL.replace(
        "            self.learning_rate = lr\n",
        "            self.learning_rate = lr\n            if torch.cuda.is_available():\n                self.encoder = self.encoder.cuda()\n",
    ).replace(
        "list(self.encoder.parameters()) + list(self.decoder.parameters())", "self.encoder.parameters()"
    ).replace("param_dict = {pn: p for pn, p in self.decoder.named_parameters()}", "param_dict = {}")
    assert codes(tmp_path, monkeypatch, {"model.py": moved}, "GPU904") == ["model.py:15 GPU904"]


# ---- a model placed by a helper of another module, or by DeepSpeed (GPU904, GPU902) ----------------------

D2L_UTILS = """\
    import torch


    def train_ch5(net, train_iter, optimizer, device, num_epochs):
        net = net.to(device)
        loss = torch.nn.CrossEntropyLoss()
        for epoch in range(num_epochs):
            for X, y in train_iter:
                l = loss(net(X.to(device)), y.to(device))
                optimizer.zero_grad()
                l.backward()
                optimizer.step()


    def evaluate(net, data_iter, optimizer):
        for X, y in data_iter:
            print(net(X).argmax(1).eq(y).float().mean())
"""
ALEXNET = """\
    import torch
    from torch import nn
    import d2lzh as d2l

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    net = nn.Sequential(nn.Conv2d(1, 96, 11, 4), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.001)
    d2l.{helper}(net, [], optimizer{rest})
"""


def test_adam_over_a_model_that_a_helper_of_another_module_moves_to_the_gpu(tmp_path, monkeypatch):
    files = {
        "d2lzh/__init__.py": "from .utils import *\n",
        "d2lzh/utils.py": D2L_UTILS,
        "alexnet.py": ALEXNET.format(helper="train_ch5", rest=", device, 5"),
    }
    assert codes(tmp_path, monkeypatch, files, "GPU904") == ["alexnet.py:7 GPU904"]


def test_adam_over_a_model_given_to_a_helper_that_does_not_move_it_stays_unknown(tmp_path, monkeypatch):
    files = {
        "d2lzh/__init__.py": "from .utils import *\n",
        "d2lzh/utils.py": D2L_UTILS,
        "alexnet.py": ALEXNET.format(helper="evaluate", rest=""),
    }
    assert codes(tmp_path, monkeypatch, files, "GPU904") == []


DEEPSPEED_TRAIN = """\
    import argparse
    import deepspeed
    import torchvision.models as models


    def main(args, loader, criterion):
        model = models.resnet50()
        model, optimizer, _, _ = deepspeed.initialize(model={given}, model_parameters=model.parameters(), args=args)
        for images, target in loader:
            loss = criterion(model(images.to(model.device)), target.to(model.device))
            model.backward(loss)
            model.step()


    if __name__ == "__main__":
        main(argparse.ArgumentParser().parse_args(), [], None)
"""


def test_a_model_handed_to_deepspeed_initialize_trains_on_the_gpu(tmp_path, monkeypatch):
    files = {"main.py": DEEPSPEED_TRAIN.format(given="model")}
    # a ResNet-50: GPU903; no GPU902, its convolutions use TF32 already (analysis/matmul_work.py)
    assert [f for f in found(lint(write(tmp_path, files), monkeypatch, **ALL)) if f.split()[1] in ("GPU902", "GPU903")] == [
        "main.py:8 GPU903",
    ]
    files = {"main.py": DEEPSPEED_TRAIN.format(given="model").replace("models.resnet50()", "models.vit_b_16()")}
    assert [f for f in found(lint(write(tmp_path, files), monkeypatch, **ALL)) if f.split()[1] in ("GPU902", "GPU903")] == [
        "main.py:8 GPU902",
    ]


def test_deepspeed_initialize_given_no_model_we_know_says_nothing(tmp_path, monkeypatch):
    files = {"main.py": DEEPSPEED_TRAIN.format(given="args.model")}
    assert [f for f in found(lint(write(tmp_path, files), monkeypatch, **ALL)) if f.split()[1] in ("GPU902", "GPU903")] == []


def test_deepspeed_with_a_half_precision_config_named_in_the_script_needs_no_tf32(tmp_path, monkeypatch):
    train = DEEPSPEED_TRAIN.format(given="model").replace(
        "    main(argparse.ArgumentParser().parse_args(), [], None)",
        '    parser = argparse.ArgumentParser()\n    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])\n'
        "    main(parser.parse_args(), [], None)",
    )
    findings = found(lint(write(tmp_path, {"main.py": train}), monkeypatch, **ALL))
    assert "main.py:8 GPU903" in findings and "main.py:8 GPU902" not in findings
    # a ViT (matmuls, no convolutions) would get GPU902 in float32 (above): here its config is half precision
    findings = found(lint(write(tmp_path, {"main.py": train.replace("models.resnet50()", "models.vit_b_16()")}), monkeypatch, **ALL))
    assert "main.py:8 GPU902" not in findings
