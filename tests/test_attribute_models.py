"""Models kept on `self` (analysis/attribute_models.py): a module attribute built and moved to CUDA in one method
and trained in a loop of another method makes a GPU training class for GPU901-903, though the module has no
`__main__` guard (shaped like pytorch-generative-model-collections' GAN classes, run from main.py)."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import diagnostics, findings, fixed

PREVIEW = {"select": ("GPU901", "GPU902", "GPU903")}

NETS = """\
    import torch
    from torch import nn, optim


    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.deconv = nn.ConvTranspose2d(62, 1, 4)

        def forward(self, z):
            return self.deconv(z)


    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 1, 4)

        def forward(self, x):
            return self.conv(x).mean((1, 2, 3))


"""

# the GAN class of the collection, reduced: moved under `if self.gpu_mode:` in __init__, trained in train()
GAN = (
    NETS
    + """\
    class GAN:
        def __init__(self, args, loader):
            self.gpu_mode = args.gpu_mode
            self.data_loader = loader
            self.G = Generator()
            self.D = Discriminator()
            self.G_optimizer = optim.Adam(self.G.parameters(), lr=2e-4)
            self.D_optimizer = optim.Adam(self.D.parameters(), lr=2e-4)
            if self.gpu_mode:
                self.G.cuda()
                self.D.cuda()
                self.BCE_loss = nn.BCELoss().cuda()
            else:
                self.BCE_loss = nn.BCELoss()

        def train(self):
            self.D.train()
            for epoch in range(25):
                for x_, _ in self.data_loader:
                    z_ = torch.rand((64, 62, 1, 1))
                    if self.gpu_mode:
                        x_, z_ = x_.cuda(), z_.cuda()
                    self.D_optimizer.zero_grad()
                    D_loss = self.BCE_loss(self.D(x_), torch.ones(64)) + self.BCE_loss(self.D(self.G(z_)), torch.zeros(64))
                    D_loss.backward()
                    self.D_optimizer.step()
                    self.G_optimizer.zero_grad()
                    G_loss = self.BCE_loss(self.D(self.G(z_)), torch.ones(64))
                    G_loss.backward()
                    self.G_optimizer.step()

        def visualize_results(self):
            with torch.no_grad():
                return self.G(torch.rand((64, 62, 1, 1)))
    """
)


def test_a_model_moved_in_init_and_trained_in_another_method_gets_all_three():
    # GPU901 at the first backward(), GPU902/903 at the first move of the model (bench/recall/README.md)
    assert findings(GAN, **PREVIEW) == ["32:13 GPU902", "32:13 GPU903", "47:17 GPU901"]
    messages = {d.code: d.message for d in diagnostics(GAN, **PREVIEW)}
    assert messages["GPU901"] == "this script trains on CUDA in float32 only"
    assert messages["GPU902"] == "float32 matrix multiplications on CUDA run without TF32"


def test_the_settings_fix_goes_after_the_imports_of_the_class_module():
    assert fixed(GAN, select=("GPU902",)).startswith(
        'import torch\nfrom torch import nn, optim\n\ntorch.set_float32_matmul_precision("high")\n'
    )


@pytest.mark.parametrize(
    "init",
    [
        # built and moved in one statement, to a device chosen at run time
        """\
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            self.G = Generator().to(self.device)
            self.D = Discriminator().to(self.device)
        """,
        # rebound to the moved module, then wrapped after the move
        """\
            self.G, self.D = Generator(), Discriminator()
            if args.cuda:
                self.G = self.G.cuda()
                self.D = self.D.cuda()
                self.D = nn.DataParallel(self.D)
        """,
    ],
)
def test_other_ways_of_placing_the_attribute(init):
    source = _gan_with_init(init)
    assert [f.split()[1] for f in findings(source, **PREVIEW)] == ["GPU902", "GPU903", "GPU901"]


def _gan_with_init(init: str, methods: str | None = None) -> str:
    """The reduced GAN class with `init` in its constructor and `methods` (default: a train() loop) after it."""
    methods = methods or """\
        def train(self):
            for x_, _ in self.data_loader:
                z_ = torch.rand((64, 62, 1, 1), device="cuda")
                D_loss = self.D(x_.cuda()).mean() - self.D(self.G(z_)).mean()
                self.D_optimizer.zero_grad()
                D_loss.backward()
                self.D_optimizer.step()
    """
    head = "class GAN:\n    def __init__(self, args, loader):\n        self.data_loader = loader\n"
    tail = "        self.D_optimizer = optim.Adam(self.D.parameters(), lr=2e-4)\n\n"
    cls = head + textwrap.indent(textwrap.dedent(init), " " * 8) + tail + textwrap.indent(textwrap.dedent(methods), " " * 4)
    return textwrap.dedent(NETS) + cls


@pytest.mark.parametrize(
    ("init", "why"),
    [
        (
            """\
            self.G, self.D = Generator(), Discriminator()
            if torch.cuda.is_available():
                pass
            else:
                self.G.cuda()
                self.D.cuda()
            """,
            "moved only in the branch that runs without a GPU",
        ),
        (
            """\
            self.G, self.D = Generator(), Discriminator()
            self.G.to("cpu")
            self.D.to("cpu")
            """,
            "moved to the CPU",
        ),
        (
            """\
            self.G = Generator()
            self.D = Discriminator()
            """,
            "never moved",
        ),
    ],
)
def test_a_model_never_placed_on_the_gpu_stays_silent(init, why):
    assert findings(_gan_with_init(init), **PREVIEW) == [], why


def test_the_negative_shapes_differ_from_a_found_one_only_where_they_say():
    placed = """\
        self.G, self.D = Generator(), Discriminator()
        if torch.cuda.is_available():
            self.G.cuda()
            self.D.cuda()
        """
    assert len(findings(_gan_with_init(placed), **PREVIEW)) == 3


def test_an_attribute_another_method_rebinds_to_a_cpu_module_is_not_resident():
    init = """\
        self.G = Generator().cuda()
        self.D = Discriminator().cuda()
    """
    train = """\
        def reset(self):
            self.D = Discriminator()  # a fresh CPU module: what train() runs may be on the CPU

        def train(self):
            for x_, _ in self.data_loader:
                D_loss = self.D(x_).mean()
                self.D_optimizer.zero_grad()
                D_loss.backward()
                self.D_optimizer.step()
    """
    assert findings(_gan_with_init(init, train), **PREVIEW) == []
    without_reset = train[train.index("    def train") :]
    assert len(findings(_gan_with_init(init, without_reset), **PREVIEW)) == 3  # the same class, never rebound


def test_an_attribute_loaded_from_a_checkpoint_elsewhere_is_not_resident():
    init = """\
        self.D = Discriminator().cuda()
    """
    train = """\
        def load(self, path):
            self.D = torch.load(path)  # not known to be a module, nor where it lands

        def train(self):
            for x_, _ in self.data_loader:
                D_loss = self.D(x_).mean()
                self.D_optimizer.zero_grad()
                D_loss.backward()
                self.D_optimizer.step()
    """
    assert findings(_gan_with_init(init, train), **PREVIEW) == []


def test_a_class_that_never_trains_its_gpu_model_stays_silent():
    source = _gan_with_init(
        """\
        self.G = Generator().cuda()
        self.D = Discriminator().cuda()
        """,
        """\
        def sample(self, n):
            with torch.no_grad():
                return [self.G(torch.rand((64, 62, 1, 1), device="cuda")) for _ in range(n)]
    """,
    )
    assert findings(source, **PREVIEW) == []


def test_a_gpu_model_used_only_for_inference_in_a_loop_stays_silent():
    # the per-batch loop runs the resident model but trains nothing: no backward, no optimizer step
    source = _gan_with_init(
        """\
        self.G = Generator().cuda()
        self.D = Discriminator().cuda()
        """,
        """\
        def score(self):
            scores = []
            with torch.no_grad():
                for x_, _ in self.data_loader:
                    scores.append(self.D(x_.cuda()))
            return scores
    """,
    )
    assert findings(source, **PREVIEW) == []


def test_a_training_loop_that_runs_no_resident_attribute_stays_silent():
    # the GPU model is only a frozen feature extractor kept on self; the loop trains a model it builds itself
    # on the CPU, and the module is not a script: no GPU training loop here
    source = _gan_with_init(
        """\
        self.G = Generator()
        self.D = Discriminator().cuda()
        """,
        """\
        def train(self, probe):
            optimizer = optim.SGD(probe.parameters(), lr=0.1)
            for x_, y_ in self.data_loader:
                loss = (probe(x_) - y_).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """,
    )
    assert findings(source, **PREVIEW) == []


def test_a_module_level_function_that_trains_stays_as_before():
    # no class keeps the model: a library function handed a model trains it where its caller put it
    source = (
        NETS
        + """\
    def train_epoch(model, loader, optimizer):
        model.cuda()
        for x, y in loader:
            loss = model(x.cuda()).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    )
    assert findings(source, **PREVIEW) == []


def test_a_loss_kept_on_the_gpu_is_no_model_to_train():
    # only the parameter-free criterion is moved; the network the loop trains stays where it was built
    source = _gan_with_init(
        """\
        self.G = Generator()
        self.D = Discriminator()
        self.criterion = nn.BCELoss().cuda()
        """,
        """\
        def train(self):
            for x_, y_ in self.data_loader:
                D_loss = self.criterion(self.D(x_), y_)
                self.D_optimizer.zero_grad()
                D_loss.backward()
                self.D_optimizer.step()
    """,
    )
    assert findings(source, **PREVIEW) == []
    assert len(findings(source.replace("self.D = Discriminator()", "self.D = Discriminator().cuda()"), **PREVIEW)) == 3


# shaped like Image_Segmentation's Solver: `self.unet = None` in the constructor, built and moved by a
# `build_model()` the constructor calls
_PLACEHOLDER_INIT = """\
    self.G = Generator().cuda()
    self.D = None
"""
_BUILD_AND_TRAIN = """\
    def build_model(self):
        self.D = Discriminator()
        self.D{move}

    def train(self):
        for x_, _ in self.data_loader:
            D_loss = self.D(x_.cuda()).mean()
            self.D_optimizer.zero_grad()
            D_loss.backward()
            self.D_optimizer.step()
"""


def test_a_none_placeholder_before_the_build_method_moves_the_model_keeps_it_resident():
    source = _gan_with_init(_PLACEHOLDER_INIT, _BUILD_AND_TRAIN.format(move=".to(torch.device('cuda'))"))
    assert [f.split()[1] for f in findings(source, **PREVIEW)] == ["GPU902", "GPU903", "GPU901"]


def test_a_none_placeholder_of_a_model_the_build_method_never_moves_stays_silent():
    # the only module written to the attribute stays on the CPU: None placed nothing either
    source = _gan_with_init(
        "self.D = None\n", _BUILD_AND_TRAIN.format(move=".train()"),
    )
    assert findings(source, **PREVIEW) == []
