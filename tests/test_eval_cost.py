"""GPU405's default findings need evidence of the evaluation's cost (`analysis/eval_cost.py`): batches of a data
loader, batches cut from a data list, or a model shown to be large; the rest (one sample at a time from a Python
list, a sampling loop over `range(steps)`, with a model of unknown size) is reported only with `unproven-cost = true`,
and its help says so."""

from __future__ import annotations

from tests.conftest import diagnostics, findings
from tests.projects_helper import lint_written

DEFAULT = {"select": ("GPU405",), "rule_options": ()}
EVERY_EVAL = {"select": ("GPU405",)}  # the tests' settings: `unproven-cost` on

# A bag-of-words classifier of a vocabulary read from the data, trained and evaluated one sentence at a time.
PER_SENTENCE = """\
import torch
from torch import nn


class BoW(nn.Module):
    def __init__(self, nwords, ntags):
        super().__init__()
        self.embedding = nn.Embedding(nwords, 64)
        self.linear = nn.Linear(64, ntags)

    def forward(self, x):
        return self.linear(self.embedding(x).sum(0, keepdim=True))


train_data, test_data, nwords, ntags = read_corpus("data")
model = BoW(nwords, ntags).cuda()
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(10):
    model.train()
    for words, tag in train_data:
        loss = nn.functional.cross_entropy(model(torch.tensor(words).cuda()), torch.tensor([tag]).cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    correct = 0
    for words, tag in test_data:
        correct += model(torch.tensor(words).cuda()).argmax().item() == tag
"""


def test_a_per_sentence_evaluation_of_a_model_of_unknown_size_is_unproven():
    assert findings(PER_SENTENCE, **DEFAULT) == []
    assert findings(PER_SENTENCE, **EVERY_EVAL) == ["28:20 GPU405"]
    (shown,) = diagnostics(PER_SENTENCE, **EVERY_EVAL)
    assert "its cost is unproven" in shown.help


def test_the_same_evaluation_over_a_data_loader_is_reported():
    loader = PER_SENTENCE.replace(
        "    for words, tag in test_data:\n",
        "    for words, tag in torch.utils.data.DataLoader(test_data, batch_size=64):\n",
    )
    assert findings(loader, **DEFAULT) == ["28:20 GPU405"]
    (shown,) = diagnostics(loader, **DEFAULT)
    assert "unproven" not in shown.help
    # a loader the code names so, handed in from elsewhere (`self.valid_loader`, `val_iter`, `valid_queue`, `valid_dl`)
    for name in ("test_loader", "val_iter", "valid_queue", "valid_dl"):
        named = PER_SENTENCE.replace("for words, tag in test_data:", f"for words, tag in enumerate({name}):")
        assert findings(named, **DEFAULT) == ["28:20 GPU405"], name
    # a name bound to a loader call
    bound = PER_SENTENCE.replace("    model.eval()\n", "    model.eval()\n    batches = DataLoader(test_data)\n")
    bound = bound.replace("for words, tag in test_data:", "for words, tag in batches:").replace("from torch import nn\n", "from torch import nn\nfrom torch.utils.data import DataLoader\n")
    assert findings(bound, **DEFAULT) == ["30:20 GPU405"]


def test_batches_cut_from_a_data_list_are_reported():
    sliced = PER_SENTENCE.replace(
        "    for words, tag in test_data:\n        correct += model(torch.tensor(words).cuda()).argmax().item() == tag\n",
        "    for batch_id in range(len(test_data) // 32 + 1):\n"
        "        start = batch_id * 32\n"
        "        batch = test_data[start:start + 32]\n"
        "        correct += model(pad(batch).cuda()).argmax().item()\n",
    )
    assert findings(sliced, **DEFAULT) == ["30:20 GPU405"]
    # a slice of fixed bounds is no batch of the data: one sample at a time still
    fixed = sliced.replace("test_data[start:start + 32]", "test_data[batch_id][:32]")
    assert findings(fixed, **DEFAULT) == []


def test_a_model_shown_to_be_large_is_reported_one_sample_at_a_time():
    large = PER_SENTENCE.replace("nn.Embedding(nwords, 64)", "nn.Embedding(nwords, 1024)").replace(
        "nn.Linear(64, ntags)", "nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))"
    ).replace("BoW(nwords, ntags)", "BoW(50000, ntags)")
    assert findings(large, **DEFAULT) == ["28:20 GPU405"]


SAMPLER = """\
import torch
from torch import nn


class Sampler:
    def __init__(self, data_dim, latent=128):
        self.decoder = nn.Sequential(nn.Linear(latent, 256), nn.ReLU(), nn.Linear(256, data_dim)).cuda()
        self.latent = latent

    def sample(self, samples, batch_size=500):
        self.decoder.eval()
        data = []
        for _ in range(samples // batch_size + 1):
            noise = torch.randn(batch_size, self.latent, device="cuda")
            data.append(self.decoder(noise).detach().cpu())
        return torch.cat(data)[:samples]
"""


def test_a_sampling_loop_of_a_small_decoder_is_unproven():
    # a few decoder forwards of unknown width while sampling rows
    assert findings(SAMPLER, **DEFAULT) == []
    assert findings(SAMPLER, **EVERY_EVAL) == ["15:25 GPU405"]


def test_a_project_loader_in_another_module(tmp_path, monkeypatch):
    # the evaluation iterates a loader a function of another module builds (`get_loader(...)`): batches of a data set
    files = {
        "data.py": """\
            from torch.utils.data import DataLoader


            def get_loader(path, batch_size):
                return DataLoader(read(path), batch_size=batch_size)
            """,
        "solver.py": """\
            import torch
            from data import get_loader


            class Solver:
                def __init__(self, net):
                    self.net = net.cuda()

                def validate(self):
                    self.net.eval()
                    for images, masks in get_loader("val", 4):
                        score(self.net(images.cuda()), masks)

                def sample(self, count):
                    self.net.eval()
                    for _ in range(count):
                        show(self.net(torch.randn(1, 3, 64, 64, device="cuda")))
            """,
    }
    from tests import projects_helper

    monkeypatch.setattr(projects_helper, "ALL_EVALS", ())  # the shipped default: `unproven-cost = false`
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU405")] == ["solver.py:12 GPU405"]


def test_a_convolutional_model_of_known_layers_is_reported_in_a_sampling_loop():
    # its activations grow with the image, whatever the parameter count
    conv = SAMPLER.replace(
        "nn.Sequential(nn.Linear(latent, 256), nn.ReLU(), nn.Linear(256, data_dim))",
        "nn.Sequential(nn.ConvTranspose2d(latent, 64, 4), nn.ReLU(), nn.Conv2d(64, data_dim, 3))",
    )
    assert findings(conv, **DEFAULT) == ["15:25 GPU405"]
