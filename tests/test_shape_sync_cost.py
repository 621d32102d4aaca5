"""GPU306's default findings need evidence of a cost, the same as GPU303's reads (`analysis/read_cost.py`): an op
whose output size depends on GPU data makes the host wait as a read does (plus a copy of a count), so it is reported
by default only when it repeats within the step (per class, per sample, in a helper's loop or comprehension), when
the step holds many waits, or when it serializes loading in the training process. One such op a step with nothing
shown on the host to serialize is silent by default (a few per cent of a GPU-bound step at most, cost_facts.md
sections 1-2) and reported with `unproven-cost = true`, its help then saying so.

Minimal repros after the corpora's shapes: a per-class `x[mask]` loop in a detector's evaluation and a per-row
`nonzero()` in a link-prediction evaluation (both kept, judged right); a decoder that strips each utterance's
padding with a mask in a comprehension of another module (kept); a diffusion sampler's one mask a step in the
forward and a loss mask once a step with workers loading (silent, judged noise)."""

from __future__ import annotations

from tests.conftest import UNPROVEN_READ, diagnostics, findings
from tests.projects_helper import lint, write

DEFAULT = {"select": ("GPU306",), "rule_options": ()}
EVERY_OP = {"select": ("GPU306",)}  # the tests' settings: `unproven-cost` on

HEAD = """\
import torch
import torchvision
import torchvision.transforms as T
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""

FOLDER = 'torchvision.datasets.ImageFolder("data/train", transform=T.Compose([T.RandomResizedCrop(224), T.ToTensor()]))'


def _train(workers: int, body: str) -> str:
    return HEAD + f"""\
loader = DataLoader({FOLDER}, batch_size=64, num_workers={workers}, pin_memory=True)
for x, y in loader:
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    out = model(x)
{body}
"""


# ---- one op a step, nothing shown on the host to serialize: silent by default --------------------------------------


ONE_MASK = """\
    keep = y != -100
    loss = torch.nn.functional.cross_entropy(out[keep], y[keep])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()"""


def test_one_mask_a_step_with_workers_is_silent_by_default_and_reported_with_the_option():
    source = _train(8, ONE_MASK)
    assert findings(source, **DEFAULT) == []
    [found] = diagnostics(source, **EVERY_OP)
    assert (found.location.row, found.code) == (14, "GPU306")
    assert found.help.endswith(UNPROVEN_READ)  # shown only because of the option: its cost is unproven


def test_a_sampler_with_one_mask_a_step_in_its_forward_is_silent():
    # a diffusion sampler: each step runs the network once, whose forward masks the logits once (mdlm's `_ddpm_update`)
    source = """\
import torch
import torch.nn as nn

device = torch.device("cuda")


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(512, 512)
        self.mask_index = 0

    def forward(self, x):
        logits = self.net(x)
        logits[x != self.mask_index] = -1e9
        kept = logits[x == self.mask_index]
        return logits, kept

    @torch.no_grad()
    def sample(self, steps):
        x = torch.zeros(64, 512, device=device)
        for i in range(steps):
            logits, kept = self.forward(x)
            x = logits.softmax(-1)
        return x


model = Denoiser().to(device)
optimizer = torch.optim.Adam(model.parameters())
for step in range(100000):
    x = torch.randn(64, 512, device=device)
    loss = model(x)[0].mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 1000 == 0:
        model.sample(1000)
"""
    assert findings(source, **DEFAULT) == []
    assert "16:16 GPU306" in findings(source, **EVERY_OP)  # (the forward's mask, seen with the option)


# ---- the op repeats within the step: reported, the help names it ------------------------------------------------


def test_a_mask_per_class_inside_the_step_is_reported_with_the_loop_named():
    # a detector's post-processing: one boolean mask per class of every image (simple-faster-rcnn's `_suppress`)
    source = _train(8, """\
    scores = out.softmax(-1)
    for cls in range(1, 21):
        kept = scores[:, cls][scores[:, cls] > 0.05]
    optimizer.zero_grad()
    out.sum().backward()
    optimizer.step()""")
    [found] = diagnostics(source, **DEFAULT)
    assert (found.location.row, found.code) == (15, "GPU306")
    assert found.help.startswith("It waits once per iteration of the loop at line 14 inside the step; boolean-mask indexing")
    assert UNPROVEN_READ not in found.help


def test_a_nonzero_per_row_of_an_evaluation_batch_is_reported():
    # link prediction: the rank of each row's true entity with `nonzero()` (KnowledgeGraphEmbedding's test step)
    source = HEAD + """\
loader = DataLoader(dataset, batch_size=16, num_workers=4)
model.eval()
with torch.no_grad():
    for epoch in range(10):
        for x, positive in loader:
            x, positive = x.to(device), positive.to(device)
            score = model(x)
            argsort = torch.argsort(score, dim=1, descending=True)
            for i in range(x.size(0)):
                ranking = (argsort[i, :] == positive[i]).nonzero()
"""
    assert findings(source, **DEFAULT) == ["18:27 GPU306"]


def test_a_mask_in_a_loop_of_training_sub_steps_is_one_wait_per_sub_step_and_silent():
    # each iteration backs up and steps on its own (adversarial sub-steps): one wait per sub-step, not a repeat
    source = _train(8, """\
    for _ in range(10):
        kept = out[y > 0]
        optimizer.zero_grad()
        kept.sum().backward(retain_graph=True)
        optimizer.step()""")
    assert findings(source, **DEFAULT) == []
    assert findings(source, **EVERY_OP) == ["14:16 GPU306"]


# ---- many waits a step, loading in the training process -----------------------------------------------------------


def test_four_separate_waits_a_step_are_evidence():
    source = _train(8, """\
    a = out[y > 0]
    b = model(a).sum()
    c = torch.nonzero(y > 1)
    d = model(out[c]).sum()
    e = torch.unique(y)
    f = model(out[e]).sum()
    print(float(f))
    optimizer.zero_grad()
    (b + d + f).backward()
    optimizer.step()""")
    found = diagnostics(source, **DEFAULT)
    assert [(d.location.row, d.code) for d in found] == [(13, "GPU306"), (15, "GPU306"), (17, "GPU306")]
    assert found[0].help.startswith("It waits as one of 4 waits a step, each serializing the launches after it;")
    # the host read counts among the step's waits (`read_cost.step_wait_points`): without it, three waits, no evidence
    assert findings(source.replace("    print(float(f))\n", ""), **DEFAULT) == []


TRANSLATE = """\
import torch

device = torch.device("cuda")


def translate(x, t, G, a=3):
    H, W = x.shape[-2:]
    ix = (t * W).floor().to(torch.int64)
    iy = (t * H).floor().to(torch.int64)
    zx0 = max(ix - a, 0)
    zy0 = max(iy - a, 0)
    zx1 = min(ix + a, 0) + W
    zy1 = min(iy + a, 0) + H
    if zx0 < zx1 and zy0 < zy1:
        x = x[:, :, zy0:zy1, zx0:zx1]
    return x


def metric(G, num_samples, batch_size):
    G = G.eval().requires_grad_(False).to(device)
    total = 0
    for start in range(0, num_samples, batch_size):
        z = torch.randn([batch_size, 512], device=device)
        orig = G(z)
        t = torch.rand([], device=device) * 0.125
        ref = translate(orig, t, G)
        total = total + (ref - G(z)).square().sum()
    return total.item()
"""


def test_back_to_back_comparisons_of_gpu_scalars_are_one_wait_not_many():
    # stylegan3's equivariance metric: Python `max` / `min` of a GPU shift, statement after statement, then an `if`
    # on them: the first drains the queue, each later one waits for a scalar kernel (`read_runs.previous_read`)
    assert findings(TRANSLATE, **DEFAULT) == []
    assert findings(TRANSLATE, **EVERY_OP) == ["10:11 GPU306", "11:11 GPU306", "12:11 GPU306"]


def test_comparisons_with_a_forward_between_each_stay_separate_waits():
    # each comparison waits for a forward queued since: four drains a step (the last joined by the `if`), evidence
    source = TRANSLATE.replace("    zy0 = max(", "    x = G(x)\n    zy0 = max(").replace("    zx1 = min(", "    x = G(x)\n    zx1 = min(")
    source = source.replace("    zy1 = min(", "    x = G(x)\n    zy1 = min(")
    found = diagnostics(source, **DEFAULT)
    assert [(d.location.row, d.code) for d in found] == [(10, "GPU306"), (12, "GPU306"), (14, "GPU306")]
    assert found[0].help.startswith("It waits as one of 4 waits a step, each serializing the launches after it;")


def test_a_mask_after_the_step_while_the_next_batch_is_made_in_process_is_reported():
    body = """\
    optimizer.zero_grad()
    out.sum().backward()
    optimizer.step()
    hits = out[out > 0.5]"""
    assert findings(_train(0, body), **DEFAULT) == ["16:12 GPU306"]
    assert findings(_train(8, body), **DEFAULT) == []  # workers make the batches: nothing on the host to serialize


# ---- a helper of another module that runs the op once per element -----------------------------------------------


DECODER = """
import torch
import torch.nn as nn

IGNORE_ID = -1


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 64)

    def preprocess(self, padded_input):
        ys = [y[y != IGNORE_ID] for y in padded_input]
        return torch.nn.utils.rnn.pad_sequence(ys, batch_first=True, padding_value=0)

    def forward(self, padded_target):
        return self.emb(self.preprocess(padded_target))
"""

DECODER_ONE_MASK = DECODER.replace(
    "ys = [y[y != IGNORE_ID] for y in padded_input]\n        return torch.nn.utils.rnn.pad_sequence(ys, batch_first=True, padding_value=0)",
    "return padded_input[padded_input != IGNORE_ID]",
)

TRAIN = """
import torch
from torch.utils.data import DataLoader

from decoder import Decoder


def main(dataset):
    device = torch.device("cuda")
    model = Decoder().to(device)
    opt = torch.optim.Adam(model.parameters())
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True)
    for epoch in range(10):
        for x, y in loader:
            y = y.to(device, non_blocking=True)
            loss = model(y).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def _project(tmp_path, monkeypatch, decoder, **overrides):
    diagnostics = lint(write(tmp_path, {"decoder.py": decoder, "train.py": TRAIN}), monkeypatch, **overrides)
    return [d for d in diagnostics if d.code == "GPU306"]


def test_a_mask_per_element_in_a_comprehension_of_a_helper_is_reported(tmp_path, monkeypatch):
    # Speech-Transformer's decoder strips each utterance's padding with a mask: ~30 waits a step
    found = _project(tmp_path, monkeypatch, DECODER, select=("GPU306",), rule_options=())
    assert len(found) == 1
    assert "once per element of the GPU tensor the step hands it" in found[0].help


def test_one_mask_in_the_same_helper_is_silent_by_default(tmp_path, monkeypatch):
    assert _project(tmp_path, monkeypatch, DECODER_ONE_MASK, select=("GPU306",), rule_options=()) == []
    assert len(_project(tmp_path, monkeypatch, DECODER_ONE_MASK, select=("GPU306",))) == 1  # with `unproven-cost`
