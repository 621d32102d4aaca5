"""GPU303's default findings need evidence of a cost (`analysis/read_cost.py`): a read repeated within the step, many
waits a step, or the next batch made in the training process after the read; the help says which. One read a step with nothing shown on
the host to serialize is silent by default (a few per cent of a GPU-bound step at most, cost_facts.md), and reported
with `unproven-cost = true`."""

from __future__ import annotations

from tests.conftest import diagnostics, findings
from tests.projects_helper import found, lint, write

DEFAULT = {"select": ("GPU303",), "rule_options": ()}
EVERY_READ = {"select": ("GPU303",)}  # the tests' settings: `unproven-cost` on

HEAD = """\
import torch
import torchvision
import torchvision.transforms as T
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()
"""


def _train(loader: str, body: str) -> str:
    return HEAD + f"""\
{loader}
for x, y in loader:
    x, y = x.to(device), y.to(device)
    out = model(x)
    loss = criterion(out, y)
    optimizer.zero_grad()
{body}
"""


FOLDER = 'torchvision.datasets.ImageFolder("data/train", transform=T.Compose([T.RandomResizedCrop(224), T.ToTensor()]))'


# ---- one read a step, nothing shown on the host: silent by default --------------------------------


def test_one_read_a_step_with_workers_is_silent_by_default_and_reported_with_the_option():
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64, num_workers=8, pin_memory=True)", """\
    loss.backward()
    optimizer.step()
    print(loss.item())""").replace("x.to(device), y.to(device)", "x.to(device, non_blocking=True), y.to(device, non_blocking=True)")
    assert findings(source, **DEFAULT) == []
    [found] = diagnostics(source, **EVERY_READ)
    assert (found.location.row, found.code) == (18, "GPU303")
    assert found.help == (  # shown only because of the option: the help says its cost is unproven, as GPU105's does
        "Keep the value on the GPU and convert it only every N steps (under `if step % N == 0:`) (its cost is unproven: "
        "the code shows one wait a step and no host work for it to serialize, a few per cent of a GPU-bound step at "
        "most, nothing in a launch-bound one)"
    )


def test_a_loader_handed_in_as_a_parameter_is_an_unknown_cost_and_silent():
    source = HEAD + """\
def train(loader):
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""
    assert findings(source, **DEFAULT) == []


# ---- loading in the training process ------------------------------------------------------------------


def test_a_read_after_the_step_with_images_loaded_in_process_is_reported_with_the_evidence():
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64)", """\
    loss.backward()
    optimizer.step()
    print(loss.item())""")
    [found] = diagnostics(source, **DEFAULT)
    assert (found.location.row, found.code) == (18, "GPU303")
    assert found.message == "`loss.item()` waits for the GPU every training step (loop at line 11)"
    assert found.help == (
        "It waits after the step's GPU work, while the next batch is made in the training process (`DataLoader` at "
        "line 10, no workers, images decoded and transformed per sample): loading and compute no longer overlap; keep "
        "the value on the GPU and convert it only every N steps (under `if step % N == 0:`)"
    )


def test_a_read_between_the_forward_and_backward_leaves_the_backward_to_overlap_the_loading():
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64)", """\
    print(loss.item())
    loss.backward()
    optimizer.step()""")
    assert findings(source, **DEFAULT) == []


def test_a_project_dataset_in_process_does_not_show_its_work_per_sample():
    source = HEAD + """\
class Pairs(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.randn(3, 224, 224), i % 10


loader = DataLoader(Pairs(1000), batch_size=64)
for x, y in loader:
    loss = criterion(model(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
"""
    assert findings(source, **DEFAULT) == []


def test_a_project_dataset_that_decodes_image_files_per_item_is_loading_evidence():
    dataset = """\
from PIL import Image


class Scenes(torch.utils.data.Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.to_tensor = T.ToTensor()

    def __len__(self):
        return len(self.paths)

    def load(self, i):
        return Image.open(self.paths[i]).convert("RGB")

    def __getitem__(self, i):
        return self.to_tensor(self.load(i)), i % 10


loader = DataLoader(Scenes(["a.png"] * 5000), batch_size=4)
for x, y in loader:
    loss = criterion(model(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
"""
    [found] = diagnostics(HEAD + dataset, **DEFAULT)
    assert (found.location.row, found.code) == (34, "GPU303")
    assert "while the next batch is made in the training process (`DataLoader` at line 28" in found.help
    # The same class reading arrays held in memory instead of files: no decoding shown, silent by default.
    in_memory = dataset.replace('return Image.open(self.paths[i]).convert("RGB")', "return self.paths[i]")
    assert findings(HEAD + in_memory, **DEFAULT) == []


def test_a_small_network_on_small_images_is_host_bound_even_with_loading_in_process():
    source = """\
import torch
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda")
net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
data = torchvision.datasets.MNIST(".", transform=torchvision.transforms.ToTensor())
loader = DataLoader(data, batch_size=64)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(net(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
"""
    assert findings(source, **DEFAULT) == []
    bigger = source.replace("torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)",
                            "torch.nn.Linear(784, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)")
    assert findings(bigger, **DEFAULT) == ["15:11 GPU303"]


def test_a_final_test_pass_run_once_is_not_loading_evidence():
    source = HEAD + f"""\
loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)
for epoch in range(90):
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

test_loader = DataLoader({FOLDER}, batch_size=64)
correct = 0
with torch.no_grad():
    for x, y in test_loader:
        out = model(x.to(device))
        correct += (out.argmax(1) == y.to(device)).sum().item()
"""
    assert findings(source, **DEFAULT) == []
    per_epoch = source.replace("test_loader = DataLoader", "    test_loader = DataLoader").replace(
        "\ncorrect = 0\nwith", "\n    correct = 0\n    with").replace("\n    for x, y in test_loader:\n        out = model(x.to(device))\n        correct",
        "\n        for x, y in test_loader:\n            out = model(x.to(device))\n            correct")
    assert findings(per_epoch, **DEFAULT) == ["23:24 GPU303"]


# ---- several waits a step ---------------------------------------------------------------------------


def test_a_read_in_a_loop_inside_the_step_is_reported_as_repeated():
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)", """\
    loss.backward()
    optimizer.step()
    for c in range(10):
        hits = ((out.argmax(1) == c) & (y == c)).sum().item()""")
    [found] = diagnostics(source, **DEFAULT)
    assert found.location.row == 19
    assert found.help.startswith("It waits once per iteration of the loop at line 18 inside the step; ")


def test_a_loop_over_a_few_literal_splits_and_the_iterable_of_a_loop_are_not_repeated_reads():
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)", """\
    loss.backward()
    optimizer.step()
    for split in ["train", "valid", "test"]:
        print(split, loss.item())
    for c in y.tolist():
        print(c)""")
    assert findings(source, **DEFAULT) == []


def test_a_read_in_a_loop_of_a_helper_the_step_runs_is_reported_in_the_helper():
    source = HEAD + """\
def block_mask(n):
    mask = torch.zeros(n, 14, 14, device=device)
    for i in range(n):
        while mask[i].sum().item() < 40:
            mask[i, torch.randint(14, ()), :] = 1
    return mask


loader = DataLoader(torchvision.datasets.FakeData(transform=T.ToTensor()), batch_size=64, num_workers=8)
for x, y in loader:
    mask = block_mask(x.size(0))
    loss = criterion(model(x.to(device) * mask.mean()), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    [found] = diagnostics(source, **DEFAULT)
    assert found.location.row == 13
    assert found.help.startswith("It waits once per iteration of the loop at line 12 inside the step; ")


def test_four_separate_waits_a_step_are_reported_and_two_are_not():
    metrics = "\n".join(f"    m{i} = float((out.argmax(1) == y).float().mean())\n    out = model(x)" for i in range(4))
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)", f"""\
    loss.backward()
    optimizer.step()
{metrics}""")
    found = diagnostics(source, **DEFAULT)
    assert [d.location.row for d in found] == [18, 20, 22, 24]
    assert all(d.help.startswith("It waits as one of 4 waits a step, each serializing the launches after it; ") for d in found)
    two = "\n".join(f"    m{i} = float((out.argmax(1) == y).float().mean())\n    out = model(x)" for i in range(2))
    assert findings(_train(f"loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)", f"""\
    loss.backward()
    optimizer.step()
{two}"""), **DEFAULT) == []


# ---- an evaluation of 28x28 images made in the training process -------------------------------------------

_EVALUATION = """\
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

device = "cuda"
transform = transforms.Compose([{transforms}transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
test_loader = DataLoader(datasets.{dataset}("data", train=False, transform=transform), batch_size=1000)


def evaluate(model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in test_loader:
            x, y = x.to(device), y.to(device)
            preds = model(x).argmax(dim=1)
            correct += preds.eq(y).sum().item()
    return correct
"""


def test_an_evaluation_of_28x28_images_made_in_process_is_silent_whatever_the_model():
    # `model` is a parameter (its size out of sight): the forward of 784-pixel images is a sliver of making the batch
    assert findings(_EVALUATION.format(transforms="", dataset="MNIST"), **DEFAULT) == []
    assert findings(_EVALUATION.format(transforms="", dataset="FashionMNIST"), **DEFAULT) == []


def test_an_evaluation_of_larger_or_resized_images_made_in_process_is_still_reported():
    cifar = _EVALUATION.format(transforms="", dataset="CIFAR10")
    assert findings(cifar, **DEFAULT) == ["17:24 GPU303"]  # 32x32 colour images: a wide net's forward can outlast loading
    resized = _EVALUATION.format(transforms="transforms.Resize(224), ", dataset="MNIST")
    assert findings(resized, **DEFAULT) == ["17:24 GPU303"]  # MNIST made 224x224 for a pretrained net: no longer tiny


def test_a_training_loop_over_28x28_images_made_in_process_keeps_its_evidence():
    training = _EVALUATION.format(transforms="", dataset="MNIST").replace("    model.eval()\n", "").replace(
        "    with torch.no_grad():\n", "    if True:\n"
    ).replace("            preds = model(x).argmax(dim=1)\n", "            out = model(x)\n            loss = out.sum()\n            loss.backward()\n            optimizer.step()\n            preds = out.argmax(dim=1)\n")
    assert findings(training.replace("def evaluate(model):", "def train(model, optimizer):"), **DEFAULT) == ["20:24 GPU303"]


# ---- a pass that runs once in the run ----------------------------------------------------------------------

_FEATURE_PASS = """\
import torch
from torch.utils.data import DataLoader

device = "cuda"
loader = DataLoader(dataset, batch_size=1, num_workers=4)
encoder = Encoder().to(device)
optimizer = torch.optim.Adam(encoder.parameters())

for epoch in range(200):
    for x, inst in loader:
        loss = encoder(x.to(device), inst.to(device)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{after}
"""

_ENCODING = """\
features = {}
for x, inst in loader:
    inst = inst.to(device)
    with torch.no_grad():
        feature_map = encoder(x.to(device), inst)
    for i in torch.unique(inst):
        label = int(i.item())
        idx = torch.nonzero(inst == i)
        features[label] = feature_map[idx[0, 0]]
"""


def test_repeated_reads_in_a_pass_run_once_after_training_are_silent():
    # a feature encoding after 200 epochs: one pass in the run, whatever its steps pay (GPU306's nonzero too)
    source = _FEATURE_PASS.format(after=_ENCODING)
    assert findings(source, select=("GPU303", "GPU306"), rule_options=()) == []


def test_repeated_reads_in_a_pass_run_every_epoch_are_reported():
    every_epoch = "\n".join("    " + line if line else line for line in _ENCODING.splitlines())
    source = _FEATURE_PASS.format(after=every_epoch)
    # (`torch.unique(inst)` is the iterable of the `for`: one wait a step with workers loading, no evidence of a cost)
    assert findings(source, select=("GPU303", "GPU306"), rule_options=()) == ["21:25 GPU303", "22:19 GPU306"]


_STEPS_THEN_PASS = """\
import torch
import tqdm
from torch.utils.data import DataLoader

device = "cuda"
loader = DataLoader(dataset, batch_size=1, num_workers=4)
encoder = Encoder().to(device)
optimizer = torch.optim.Adam(encoder.parameters())
batches = iter(loader)

{training}
    x, inst = next(batches)
    loss = encoder(x.to(device), inst.to(device)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""" + _ENCODING


def test_repeated_reads_in_a_pass_run_once_after_a_run_of_counted_training_steps_are_silent():
    # meta-training counted in iterations (`for it in range(60000): next(batches)`), then one final pass
    for training in ("for step in range(60000):", "for step in range(args.iterations):", "for step in tqdm.trange(60000):"):
        source = _STEPS_THEN_PASS.replace("{training}", training)
        assert findings(source, select=("GPU303", "GPU306"), rule_options=()) == [], training


def test_repeated_reads_in_a_pass_after_a_short_step_loop_or_a_single_loader_pass_are_reported():
    # ten steps of a smoke test, or one pass over the loader: the final pass is no sliver of the run
    for training in ("for step in range(10):", "for step, _ in enumerate(loader):"):
        source = _STEPS_THEN_PASS.replace("{training}", training)
        assert findings(source, select=("GPU303", "GPU306"), rule_options=()) == ["23:21 GPU303", "24:15 GPU306"], training


# ---- a loop of training sub-steps inside the step (`read_cost.substep_loop`) --------------------------------------

_META = HEAD + """\
loader = DataLoader({folder}, batch_size=5, num_workers=4)
tasks = iter(loader)


def adapt(learner, x, y):
    for _ in range(5):
        inner = criterion(learner(x), y)
        inner.backward()
        optimizer.step()
    return criterion(learner(x), y)


for iteration in range(60000):
    optimizer.zero_grad()
    meta_error = 0.0
    for task in range(32):
        x, y = next(tasks)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
{body}
    optimizer.step()
""".replace("{folder}", FOLDER)


def test_a_read_per_task_of_a_meta_batch_whose_task_runs_a_backward_is_not_a_repeated_read():
    # each task of the meta-batch is a forward and a backward of its own: one wait per sub-step, a per-step read
    source = _META.replace("{body}", """\
        error = criterion(model(x), y)
        error.backward()
        meta_error += error.item()""")
    assert findings(source, **DEFAULT) == []
    assert [(f.location.row, f.code) for f in diagnostics(source, **EVERY_READ)] == [(30, "GPU303")]


def test_a_read_per_task_whose_task_runs_a_helper_that_trains_is_not_a_repeated_read():
    source = _META.replace("{body}", """\
        error = adapt(model, x, y)
        meta_error += error.item()""")
    assert findings(source, **DEFAULT) == []


def test_a_read_per_item_of_a_loop_that_runs_no_backward_stays_a_repeated_read():
    # the loop over classes of one step: a round trip per class, no work of its own between the waits
    source = _META.replace("{body}", """\
        out = model(x)
        error = criterion(out, y)
        error.backward()
        for c in range(10):
            meta_error += ((out.argmax(1) == c) & (y == c)).sum().item()""")
    [found] = diagnostics(source, **DEFAULT)
    assert found.location.row == 32
    assert found.help.startswith("It waits once per iteration of the loop at line 31 inside the step; ")


# ---- waits weighed against the passes of an iteration; copies of a search's results (round 24) ------------------

_GAN = HEAD.replace("model = torchvision.models.resnet50().to(device)", """\
gen = torchvision.models.resnet50().to(device)
disc = torchvision.models.resnet50().to(device)""").replace("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", """\
opt_g = torch.optim.Adam(gen.parameters())
opt_d = torch.optim.Adam(disc.parameters())""") + f"""\
loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)
for x, y in loader:
    x = x.to(device)
{{phases}}"""


def _phase(net: str, opt: str, reads: int) -> str:
    lines = [f"    {opt}.zero_grad()", f"    loss = -disc(gen(x)).mean() if '{net}' == 'g' else disc(x).mean()", "    loss.backward()",
             f"    {opt}.step()", "    logs = loss.item()"]
    lines += ["    acc = (disc(x) > 0).float().mean().item()"] * (reads - 1)
    return "\n".join(lines)


def test_waits_spread_over_the_updates_of_a_gan_iteration_are_no_evidence():
    # two discriminator and two generator updates an iteration, two waits after each: two waits per update
    source = _GAN.replace("{phases}", "\n".join(_phase(n, o, 2) for n, o in (("d", "opt_d"), ("d", "opt_d"), ("g", "opt_g"), ("g", "opt_g"))))
    assert findings(source, **DEFAULT) == []
    shown = diagnostics(source, **EVERY_READ)  # with the option: each wait, its cost unproven
    assert len(shown) == 7 and all(d.help.endswith("nothing in a launch-bound one)") for d in shown)


def test_four_waits_or_more_after_each_of_two_updates_are_still_many_waits():
    # five reads after each of the two updates: nine separate waits (`waits_per_step`), more than four per update
    source = _GAN.replace("{phases}", "\n".join(_phase(n, o, 5) for n, o in (("d", "opt_d"), ("g", "opt_g"))))
    found = diagnostics(source, **DEFAULT)
    assert [d.location.row for d in found] == [19, 20, 21, 22, 23, 28, 29, 30, 31]
    assert all(d.help.startswith("It waits as one of 9 waits a step, each serializing the launches after it; ") for d in found)


def test_the_branches_of_an_if_count_as_one_backward_pass():
    # `scaler.scale(loss).backward()` or `loss.backward()`: one pass runs, the four waits stay four in one step
    metrics = "\n".join(f"    m{i} = float((out.argmax(1) == y).float().mean())\n    out = model(x)" for i in range(4))
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)", f"""\
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    optimizer.step()
{metrics}""").replace("criterion = torch.nn.CrossEntropyLoss()", "criterion = torch.nn.CrossEntropyLoss()\nscaler = None")
    assert len(diagnostics(source, **DEFAULT)) == 4


def test_waits_of_a_loop_that_runs_a_loop_of_gradient_steps_are_spread_over_them():
    metrics = "\n".join(f"    m{i} = float((out.argmax(1) == y).float().mean())\n    out = model(x)" for i in range(4))
    source = _train(f"loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)", f"""\
    for _ in range(steps):
        criterion(model(x), y).backward()
        optimizer.step()
{metrics}""").replace("criterion = torch.nn.CrossEntropyLoss()", "criterion = torch.nn.CrossEntropyLoss()\nsteps = 64")
    assert findings(source, **DEFAULT) == []


_DECODE = HEAD + f"""\
loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)


def evaluate():
    model.eval()
    predictions = []
    with torch.no_grad():
        for x, y in loader:
            x = x.to(device)
{{body}}
    return predictions
"""


def test_copies_of_the_hypotheses_a_decoding_method_returned_are_not_repeated_reads():
    # `model.recognize(x)` searched token by token, reading each on the host: its results are finished
    source = _DECODE.replace("{body}", """\
            y_hats = model.recognize(x)
            for i in range(y.size(0)):
                predictions.append(y_hats[i].cpu().detach().numpy())""")
    assert findings(source, **DEFAULT) == []


def test_copies_of_the_forward_output_per_sample_stay_repeated_reads():
    source = _DECODE.replace("{body}", """\
            logits = model(x)
            for i in range(y.size(0)):
                predictions.append(logits[i].cpu().numpy())""")
    [found] = diagnostics(source, **DEFAULT)
    assert (found.location.row, found.code) == (21, "GPU303")
    assert found.help.startswith("It waits once per iteration of the loop at line 20 inside the step; ")



_SCALE_LOSS = """
import torch


def discriminator_loss(real_outputs, fake_outputs):
    loss = 0
    real_losses = []
    for dr, dg in zip(real_outputs, fake_outputs):
        r_loss = torch.mean((1 - dr) ** 2)
        loss += r_loss + torch.mean(dg ** 2)
        real_losses.append(r_loss.item())
    return loss, real_losses
"""

_SCALE_TRAIN = HEAD.replace("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", "disc = torchvision.models.resnet50().to(device)\nopt_d = torch.optim.Adam(disc.parameters())") + f"""\
from losses import discriminator_loss

loader = DataLoader({FOLDER}, batch_size=64, num_workers=8)
for x, y in loader:
    x = x.to(device)
    y_hat = model(x)
    opt_d.zero_grad()
{{call}}
    loss_d.backward()
    opt_d.step()
"""


def test_a_helper_walking_the_outputs_a_module_returned_among_several_is_not_a_per_element_read(tmp_path, monkeypatch):
    # `real, fake, _, _ = mpd(y, y_hat)`: lists of the sub-discriminators' outputs, a few a step
    train = _SCALE_TRAIN.replace("{call}", """\
    real_outs, fake_outs, _, _ = disc(x, y_hat.detach())
    loss_d, losses_d = discriminator_loss(real_outs, fake_outs)""")
    root = write(tmp_path, {"losses.py": _SCALE_LOSS, "train.py": train})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_a_helper_walking_the_rows_of_a_module_output_stays_a_per_element_read(tmp_path, monkeypatch):
    train = _SCALE_TRAIN.replace("{call}", """\
    scores = disc(x, y_hat.detach())
    loss_d, losses_d = discriminator_loss(scores, scores)""")
    root = write(tmp_path, {"losses.py": _SCALE_LOSS, "train.py": train})
    [call] = [d for d in lint(root, monkeypatch, select=("GPU303",), rule_options=()) if d.location.row == 19]
    assert call.help.startswith("It waits in a loop of the helper (at losses.py:11), once per element of the GPU tensor the step hands it; ")


def test_copies_of_what_an_encode_method_returned_stay_repeated_reads():
    # `model.encode(x)` is a forward by another name: nothing was read on the host yet
    source = _DECODE.replace("{body}", """\
            embeddings = model.encode(x)
            for i in range(y.size(0)):
                predictions.append(embeddings[i].cpu().numpy())""")
    [found] = diagnostics(source, **DEFAULT)
    assert found.help.startswith("It waits once per iteration of the loop at line 20 inside the step; ")


def test_copies_of_search_results_written_on_either_branch_are_not_repeated_reads():
    source = _DECODE.replace("{body}", """\
            if isinstance(model, torch.nn.DataParallel):
                y_hats = model.module.recognize(x)
            else:
                y_hats = model.recognize(x)
            for i in range(y.size(0)):
                predictions.append(y_hats[i].cpu().detach().numpy())""")
    assert findings(source, **DEFAULT) == []
