"""Round 13: factories shaped by a batch's first dimension (`torch.ones(x.size(0), 1)` in a DataLoader loop whose
batch size the code shows): that dimension is at most the batch size (`analysis/factory_bytes.py`,
`_batch_dimension`), so a label vector is a few hundred bytes a step. The nearby shapes stay reported: a large
per-sample size, a batch size the code does not show, a batch name rebound to another shape, a `collate_fn`."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import findings

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

# DeepLearningDTU's GAN notebook: BCE labels made on the CPU every step, sized by the batch the loader hands out.
GAN = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader
    from torchvision.datasets import MNIST
    from torchvision.transforms import ToTensor

    device = torch.device("cuda")
    batch_size = {batch}
    loader = DataLoader(MNIST("./", transform=ToTensor()), batch_size=batch_size{extra})
    for epoch in range(50):
        for x, _ in loader:
            {rebind}batch_size = x.size(0)
            true_label = torch.ones(batch_size, 1).to(device)
            fake_label = torch.zeros(x.shape[0], {width}).to(device)
            mask = torch.ones(len(x), 1).to(device)
            output = discriminator(x.to(device))
            loss = bce(output, true_label) + bce(output, fake_label) + mask.sum()
            loss.backward()
            optimizer.step()
""")


def _gan(batch="64", width="1", extra="", rebind=""):
    return GAN.format(batch=batch, width=width, extra=extra, rebind=rebind)


def test_labels_sized_by_a_known_batch_are_silent():
    # 64 x 1 floats: 512 bytes a step, a copy of a few µs
    assert findings(_gan(), select=("GPU201",)) == []


def test_a_large_per_sample_size_stays_reported():
    # 64 x 4096 x 4096 floats (8 GiB at 8 bytes an element): far above 512 KiB
    assert findings(_gan(width="4096, 4096"), select=("GPU201",)) == ["13:22 GPU201"]


def test_a_very_large_batch_stays_reported():
    # 100000 x 1 x 8 bytes = 800 KB: above the line
    assert findings(_gan(batch="100000"), select=("GPU201",)) == ["12:22 GPU201", "13:22 GPU201", "14:16 GPU201"]


def test_a_batch_size_out_of_sight_stays_reported():
    assert findings(_gan(batch="int(sys.argv[1])"), select=("GPU201",)) == ["12:22 GPU201", "13:22 GPU201", "14:16 GPU201"]


def test_a_collate_fn_hides_the_batch_shape():
    found = findings(_gan(extra=", collate_fn=my_collate"), select=("GPU201",))
    assert found == ["12:22 GPU201", "13:22 GPU201", "14:16 GPU201"]


def test_a_batch_name_rebound_to_another_shape_stays_reported():
    # `x = x.view(-1, 28)`: its first dimension is no longer the batch size
    found = findings(_gan(rebind="x = x.view(-1, 28)\n        "), select=("GPU201",))
    assert found == ["13:22 GPU201", "14:22 GPU201", "15:16 GPU201"]


# minimal-diffusion: the batch is rescaled in place before its length sizes the timesteps.
DIFFUSION = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader

    BATCH = {batch}
    loader = DataLoader(dataset, batch_size=BATCH, num_workers=4, pin_memory=True)
    for images, labels in loader:
        images, labels = 2 * images.to("cuda") - 1, labels.to("cuda")
        t = torch.randint(1000, (len(images),), dtype=torch.int64).to("cuda")
        loss = model(images, t).mean()
        loss.backward()
        optimizer.step()
""")


def test_a_shape_keeping_rebinding_keeps_the_batch_dimension():
    assert findings(DIFFUSION.format(batch=128), select=("GPU201",)) == []
    assert findings(DIFFUSION.format(batch=128000), select=("GPU201",)) == ["8:9 GPU201"]


def test_the_whole_batch_length_is_not_the_batch_size():
    # `for batch in loader`: a tuple or dict of fields, whose `len` is their count, not the batch size; and a
    # name that is not the batch (a parameter) is not bounded either
    source = textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader

        loader = DataLoader(dataset, batch_size=8)
        for batch in loader:
            x = batch[0].to("cuda")
            mask = torch.ones(x.size(0), 1).to("cuda")
            t = torch.zeros(len(batch), 100000).to("cuda")
            loss = model(x, mask, t).mean()
            loss.backward()
            optimizer.step()
    """)
    assert findings(source, select=("GPU201",)) == ["7:12 GPU201", "8:9 GPU201"]


# deeplearningzerotoall's seq2seq: a zero hidden state per sentence, sized by the encoder's `hidden_size`.
SEQ2SEQ = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    device = "cuda"


    class Encoder(nn.Module):
        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size)
            {extra}

        def forward(self, x, hidden):
            return self.gru(self.embedding(x).view(1, 1, -1), hidden)


    def train(pairs, encoder, n_iter):
        optimizer = torch.optim.SGD(encoder.parameters(), lr=0.01)
        for i in range(n_iter):
            hidden = torch.zeros([1, 1, encoder.hidden_size]).to(device)
            _, hidden = encoder(pairs[i], hidden)
            loss = hidden.sum()
            loss.backward()
            optimizer.step()


    enc = Encoder(100, {hidden}).to(device)
    train(pairs, enc, 5000)
""")


def test_a_state_sized_by_a_small_module_attribute_is_silent():
    # 1 x 1 x 16 floats: what `Encoder(100, 16)` writes to `self.hidden_size`
    assert findings(SEQ2SEQ.format(hidden="16", extra=""), select=("GPU201",)) == []


def test_a_large_or_unknown_module_attribute_stays_reported():
    # 1 x 1 x 100000 x 8 bytes = 800 KB
    assert findings(SEQ2SEQ.format(hidden="100000", extra=""), select=("GPU201",)) == ["22:18 GPU201"]
    # the width from the command line: not known
    assert findings(SEQ2SEQ.format(hidden="int(sys.argv[1])", extra=""), select=("GPU201",)) == ["22:18 GPU201"]
    # a second write of the attribute (here in `__init__` too): which one holds is not read
    doubled = SEQ2SEQ.format(hidden="16", extra="self.hidden_size = input_size * 4096")
    assert findings(doubled, select=("GPU201",)) == ["22:18 GPU201"]


def test_a_batch_size_divided_among_gpus_is_at_most_the_undivided_one():
    # minimal-diffusion: `args.batch_size = args.batch_size // ngpus` before the loader is built
    parser = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--batch-size', type=int, default={batch})\n"
    parser += "args = parser.parse_args()\nargs.batch_size = args.batch_size // torch.cuda.device_count()\n"
    divided = DIFFUSION.replace("BATCH = {batch}\n", parser).replace("batch_size=BATCH", "batch_size=args.batch_size")
    assert findings(divided.format(batch=128), select=("GPU201",)) == []
    assert findings(divided.format(batch=128000), select=("GPU201",)) == ["12:9 GPU201"]


def test_the_length_of_a_field_never_copied_as_a_tensor_is_not_the_batch_size():
    # `for images, labels in loader` where `images` is a dict of fields: its `len` counts the keys
    source = DIFFUSION.format(batch=128).replace('images, labels = 2 * images.to("cuda") - 1, labels.to("cuda")', 'labels = labels.to("cuda")')
    source = source.replace("model(images, t)", "model({k: v.cuda() for k, v in images.items()}, t)")
    assert findings(source, select=("GPU201",)) == ["8:9 GPU201"]
