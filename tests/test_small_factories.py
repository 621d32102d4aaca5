"""Round 12: factories of a size the code shows to be small (`analysis/factory_bytes.py`), and legacy constructors
given data (`analysis/legacy_constructors.py`): per-step copies that cost nothing measurable, and the nearby
shapes that stay reported."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpulint.analysis.factory_bytes import factory_bytes
from gpulint.analysis.legacy_constructors import DATA, EMPTY, SIZE, legacy_form
from tests.conftest import findings

# x-transformers' train_copy: a generator of token batches that the training loop advances every step.
COPY_TASK = textwrap.dedent("""\
    import torch

    BATCH_SIZE = {batch}
    SEQ = 32
    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


    def cycle():
        while True:
            prefix = torch.ones((BATCH_SIZE, 1)).long().to(DEVICE)
            src = torch.randint(2, 18, (BATCH_SIZE, SEQ)).long().to(DEVICE)
            tgt = torch.cat((prefix, src, src), 1)
            src_mask = torch.ones(BATCH_SIZE, src.shape[1]).bool().to(DEVICE)
            yield src, tgt, src_mask


    model = Model().to(DEVICE)
    optim = torch.optim.Adam(model.parameters())
    for i in range(100000):
        src, tgt, src_mask = next(cycle())
        loss = model(src, tgt, mask=src_mask)
        loss.backward()
        optim.step()
        optim.zero_grad()
""")


def test_a_generator_of_small_token_batches_is_silent():
    # 32 x 32 int64 tokens and masks: 8 KB a step, a copy of a few µs
    assert findings(COPY_TASK.format(batch=32), select=("GPU201",)) == []


UNPROVEN_COST = (("GPU201", (("unproven-cost", True),)),)


def test_the_same_generator_at_large_sizes_is_reported():
    # 65536 x 32 x 8 bytes = 16 MiB a tensor (the mask's size read from `src.shape[1]`); the 65536 x 1 prefix is
    # 512 KiB, at the line, and silent
    assert findings(COPY_TASK.format(batch=65536), select=("GPU201",)) == ["11:15 GPU201", "13:20 GPU201"]
    # a batch size given on the command line: not known, so no evidence of a cost (silent), reported with `unproven-cost`
    unknown = COPY_TASK.format(batch="int(sys.argv[1])")
    assert findings(unknown, select=("GPU201",)) == []
    assert findings(unknown, select=("GPU201",), rule_options=UNPROVEN_COST) == ["10:18 GPU201", "11:15 GPU201", "13:20 GPU201"]


# keon/3-min-pytorch's GAN: label vectors and a noise batch of BATCH_SIZE rows, made on the CPU every step.
GAN = textwrap.dedent("""\
    import torch

    DEVICE = torch.device("cuda")
    BATCH_SIZE = {batch}

    for epoch in range(EPOCHS):
        for i, (images, _) in enumerate(train_loader):
            images = images.reshape(BATCH_SIZE, -1).to(DEVICE)
            real_labels = torch.ones(BATCH_SIZE, 1).to(DEVICE)
            fake_labels = torch.zeros(BATCH_SIZE, 1).to(DEVICE)
            z = torch.randn(BATCH_SIZE, {latent}).to(DEVICE)
            d_loss = criterion(D(images), real_labels) + criterion(D(G(z)), fake_labels)
            d_optimizer.zero_grad()
            d_loss.backward()
            d_optimizer.step()
""")


def test_gan_labels_and_noise_of_a_small_batch_are_silent():
    assert findings(GAN.format(batch=100, latent=64), select=("GPU201",)) == []


def test_gan_noise_of_a_large_latent_stays_reported():
    # 100 x 4096 x 8 bytes = 3.2 MB of noise; the 100-float labels stay silent
    assert findings(GAN.format(batch=100, latent=4096), select=("GPU201",)) == ["11:13 GPU201"]
    # sizes taken from the batch are not known: silent by default, reported with `unproven-cost`
    from_batch = GAN.format(batch=100, latent=64).replace("BATCH_SIZE, 1)", "images.size(0), 1)")
    assert findings(from_batch, select=("GPU201",)) == []
    assert findings(from_batch, select=("GPU201",), rule_options=UNPROVEN_COST) == ["9:23 GPU201", "10:23 GPU201"]


def test_a_small_legacy_size_form_is_silent_and_a_large_one_stays():
    source = GAN.format(batch=100, latent=64).replace("torch.randn(BATCH_SIZE, 64)", "torch.FloatTensor(BATCH_SIZE, {n}).normal_()")
    assert findings(source.format(n=64), select=("GPU202",)) == []
    assert findings(source.format(n=4096), select=("GPU202",)) == ["11:13 GPU202"]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("torch.zeros(3, 4)", 96),
        ("torch.ones((2, 3))", 48),
        ("torch.zeros(size=(2, 2))", 32),
        ("torch.full((4,), 7)", 32),
        ("torch.randint(0, 10, (5,))", 40),
        ("torch.randint(10, size=(2, 5))", 80),
        ("torch.randperm(128)", 1024),
        ("torch.arange(10)", 80),
        ("torch.arange(2, 10, 2)", 32),
        ("torch.linspace(0, 1, 50)", 400),
        ("torch.eye(3)", 72),
        ("torch.eye(3, 5)", 120),
        ("torch.zeros(2, dtype=torch.complex64)", 32),
        ("torch.zeros(())", 8),
        ("torch.zeros(n)", None),
        ("torch.zeros(*shape)", None),
        ("torch.zeros((*shape, 3))", None),
        ("torch.randint(0, 10, n)", None),
        ("torch.ones_like(x)", None),
        ("torch.normal(mean, std)", None),
    ],
)
def test_factory_bytes(code, expected):
    from gpulint.analysis.model import SemanticModel

    module = cst.parse_module("import torch\nx = " + code + "\n")
    model = SemanticModel(module, "t.py")
    call = module.body[1].body[0].value  # type: ignore[attr-defined]
    short = model.residency.factory(call)
    assert factory_bytes(model, call, short) == expected


@pytest.mark.parametrize(
    ("code", "form"),
    [
        ("torch.FloatTensor()", EMPTY),
        ("torch.FloatTensor(2, 3)", SIZE),
        ("torch.FloatTensor(*shape)", SIZE),
        ("torch.FloatTensor(n)", SIZE),  # `n = 8` below
        ("torch.FloatTensor(x.size())", SIZE),
        ("torch.FloatTensor(x.size(0))", SIZE),
        ("torch.FloatTensor(x.shape[0])", SIZE),
        ("torch.FloatTensor(len(x))", SIZE),
        ("torch.LongTensor(range(10))", SIZE),
        ("torch.FloatTensor(rows)", SIZE),  # `_, rows = x.shape` below
        ("torch.FloatTensor([1, 2])", DATA),
        ("torch.FloatTensor((1, 2))", DATA),
        ("torch.FloatTensor(data)", DATA),
        ("torch.FloatTensor(obs[None, :])", DATA),
        ("torch.FloatTensor([w for w in words])", DATA),
    ],
)
def test_legacy_form(code, form):
    from gpulint.analysis.model import SemanticModel

    module = cst.parse_module(f"import torch\nn = 8\n_, rows = x.shape\ny = {code}\n")
    model = SemanticModel(module, "t.py")
    call = module.body[3].body[0].value  # type: ignore[attr-defined]
    assert legacy_form(model, call) == form


def test_a_small_factory_moved_later_is_silent_and_a_large_one_stays():
    small = GAN.format(batch=100, latent=64).replace(
        "z = torch.randn(BATCH_SIZE, 64).to(DEVICE)", "z = torch.randn(BATCH_SIZE, 64)\n        z = z.to(DEVICE)"
    )
    assert findings(small, select=("GPU201",)) == []
    large = small.replace("torch.randn(BATCH_SIZE, 64)", "torch.randn(BATCH_SIZE, 4096)")
    assert findings(large, select=("GPU201",)) == ["11:13 GPU201"]
