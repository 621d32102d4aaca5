"""Per-step host reads in functions a step loop calls (issue 14, ninth corpus classes A/B): a module-level helper
of the same file called by name on every iteration is per-step code, reported at its own line with the call
named (`analysis/helper_steps.py`); a few inner passes (`for _ in range(n_critic):`) keep the outer loop a
training loop; a batch rebuilt as `{k: v.to(device) for k, v in batch.items()}` holds GPU tensors; a helper of
another module that reads every parameter's grad (`for p in model.parameters(): ... .item()`) waits at each call
given a GPU module or its `named_parameters()`.

Shapes after the Machine Learning with PyTorch book's GAN lessons (`d_train` / `g_train`, WGAN's five critic
passes), GaLore's token count and Amber's / I-JEPA's gradient-norm loggers. Negatives: a helper called under
`if step % log_every == 0:`, a helper called once after training, a helper whose value is a Python number, a dict
comprehension that moves nothing, a grad logger under a log interval or given a CPU model.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

MODELS = """
import torch.nn as nn


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x.view(x.size(0), -1))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(100, 1024), nn.ReLU(), nn.Linear(1024, 784), nn.Tanh())

    def forward(self, z):
        return self.net(z)
"""

GAN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from models import Discriminator, Generator

device = torch.device("cuda")
loader = DataLoader(datasets.MNIST(".", transform=transforms.ToTensor()), batch_size=64, num_workers=4, pin_memory=True)
disc_model = Discriminator().to(device)
gen_model = Generator().to(device)
loss_fn = nn.BCELoss()
d_optimizer = torch.optim.Adam(disc_model.parameters())
g_optimizer = torch.optim.Adam(gen_model.parameters())


def d_train(x):
    disc_model.zero_grad()
    x = x.to(device)
    d_loss = loss_fn(disc_model(x), torch.ones(x.size(0), 1, device=device))
    d_loss.backward()
    d_optimizer.step()
    return d_loss.item()


def g_train(x):
    gen_model.zero_grad()
    z = torch.rand(x.size(0), 100, device=device)
    g_loss = loss_fn(disc_model(gen_model(z)), torch.ones(x.size(0), 1, device=device))
    g_loss.backward()
    g_optimizer.step()
    return g_loss.item()


for epoch in range(100):
    d_losses, g_losses = [], []
    for i, (x, _) in enumerate(loader):
        for _ in range(5):
            d_loss = d_train(x)
        d_losses.append(d_loss)
        g_losses.append(g_train(x))
    print(epoch, sum(d_losses) / len(d_losses))
"""


def test_same_file_helpers_a_training_loop_calls_report_their_reads_at_their_lines(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"models.py": MODELS, "gan.py": GAN}), monkeypatch, select=("GPU303",))
    assert sorted(found(diagnostics)) == ["gan.py:24 GPU303", "gan.py:33 GPU303"]  # not again at the calls
    by_line = {d.location.row: d for d in diagnostics}
    assert by_line[24].message == (
        "`d_loss.item()` waits for the GPU every training step (`d_train` at line 18, run by the call at line 40)"
    )
    assert by_line[33].message == (
        "`g_loss.item()` waits for the GPU every training step (`g_train` at line 27, run by the call at line 42)"
    )


def test_a_helper_called_under_a_log_interval_or_once_after_training_is_silent(tmp_path, monkeypatch):
    logged = GAN.replace("            d_loss = d_train(x)\n", "            if i % 100 == 0:\n                d_loss = d_train(x)\n")
    logged = logged.replace("        g_losses.append(g_train(x))\n", "        if i % 100 == 0:\n            g_losses.append(g_train(x))\n")
    assert found(lint(write(tmp_path / "logged", {"models.py": MODELS, "gan.py": logged}), monkeypatch, select=("GPU303",))) == []
    once = GAN.replace(
        "        for _ in range(5):\n"
        "            d_loss = d_train(x)\n"
        "        d_losses.append(d_loss)\n"
        "        g_losses.append(g_train(x))\n",
        "        d_losses.append(x.sum())\n",
    ) + "x, _ = next(iter(loader))\nprint(d_train(x), g_train(x))\n"
    assert found(lint(write(tmp_path / "once", {"models.py": MODELS, "gan.py": once}), monkeypatch, select=("GPU303",))) == []


def test_a_helper_whose_value_is_a_python_number_is_silent(tmp_path, monkeypatch):
    numbers = """
    import torch
    from torch.utils.data import DataLoader

    from models import Discriminator

    device = torch.device("cuda")
    model = Discriminator().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(torch.utils.data.TensorDataset(torch.randn(60000, 784), torch.rand(60000, 1)), batch_size=64, num_workers=4)


    def progress(i, total):
        done = float(i) / total
        if done > 0.5:
            print(f"{done:.2f}")
        return int(done * 100)


    for epoch in range(10):
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.binary_cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            progress(i, len(loader))
    """
    assert found(lint(write(tmp_path, {"models.py": MODELS, "train.py": numbers}), monkeypatch, select=("GPU303",))) == []


TOKENS = """
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM

device = "cuda"
model = AutoModelForCausalLM.from_pretrained("gpt2").to(device)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)


def train(dataset, pad_idx):
    tokens_seen = 0
    loader = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True, persistent_workers=True)
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        tokens_seen += (batch["input_ids"] != pad_idx).sum().item()
        loss = model(**batch, labels=batch["input_ids"]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return tokens_seen
"""


def test_a_token_count_on_a_batch_moved_by_a_dict_comprehension_is_a_per_step_read(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": TOKENS}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["train.py:16 GPU303"]
    assert diagnostics[0].message == (
        '`(batch["input_ids"] != pad_idx).sum().item()` waits for the GPU every training step (loop at line 14)'
    )


def test_a_dict_comprehension_that_moves_nothing_keeps_its_values_on_the_host(tmp_path, monkeypatch):
    kept = TOKENS.replace("batch = {k: v.to(device) for k, v in batch.items()}", "batch = {k: v for k, v in batch.items()}")
    kept = kept.replace('loss = model(**batch, labels=batch["input_ids"]).loss', 'loss = model(**{k: v.to(device) for k, v in batch.items()}).loss')
    assert found(lint(write(tmp_path, {"train.py": kept}), monkeypatch, select=("GPU303",))) == []


GRAD_UTILS = """
def get_grad_norm(model):
    square_sum = 0.0
    for param in model.parameters():
        if param.grad is not None:
            square_sum += param.grad.detach().norm(2).item() ** 2
    return square_sum ** 0.5


def grad_logger(named_params):
    norms = []
    for n, p in named_params:
        if p.grad is not None and not n.endswith(".bias"):
            norms.append(float(p.grad.norm()))
    return norms


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
"""

GRAD_TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from grad_utils import count_parameters, get_grad_norm, grad_logger

device = torch.device("cuda")
model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
loader = DataLoader(TensorDataset(torch.randn(100000, 4096), torch.randint(0, 10, (100000,))), batch_size=256,
                    num_workers=4, pin_memory=True, persistent_workers=True)
print(count_parameters(model))
for step, (x, y) in enumerate(loader):
    loss = nn.functional.cross_entropy(model(x.to(device, non_blocking=True)), y.to(device, non_blocking=True))
    loss.backward()
    grad_norm = get_grad_norm(model)
    stats = grad_logger(model.named_parameters())
    optimizer.step()
    optimizer.zero_grad()
"""


def test_grad_norm_helpers_of_another_module_read_every_parameter_each_step(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"grad_utils.py": GRAD_UTILS, "train.py": GRAD_TRAIN}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["train.py:17 GPU303", "train.py:18 GPU303"]
    assert [d.message for d in diagnostics] == [
        "`get_grad_norm(model)` (`.item()` at grad_utils.py:6) waits for the GPU every training step (loop at line 14)",
        "`grad_logger(model.named_parameters())` (`float()` of a tensor at grad_utils.py:14) waits for the GPU every training step (loop at line 14)",
    ]


def test_grad_norm_helpers_under_a_log_interval_or_on_a_cpu_model_are_silent(tmp_path, monkeypatch):
    logged = GRAD_TRAIN.replace(
        "    grad_norm = get_grad_norm(model)\n    stats = grad_logger(model.named_parameters())\n",
        "    if step % 100 == 0:\n        grad_norm = get_grad_norm(model)\n        stats = grad_logger(model.named_parameters())\n",
    )
    assert found(lint(write(tmp_path / "logged", {"grad_utils.py": GRAD_UTILS, "train.py": logged}), monkeypatch, select=("GPU303",))) == []
    on_cpu = GRAD_TRAIN.replace('device = torch.device("cuda")', 'device = torch.device("cpu")')
    assert found(lint(write(tmp_path / "cpu", {"grad_utils.py": GRAD_UTILS, "train.py": on_cpu}), monkeypatch, select=("GPU303",))) == []


EVALUATE = """
import torch
from torch.utils.data import DataLoader


def evaluate_model(model, dataset, pad_idx, device):
    tokens, total_loss = 0, torch.tensor(0.0, device=device)
    with torch.no_grad():
        for batch in DataLoader(dataset, batch_size=16, num_workers=4, pin_memory=True):
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}  # no sync point (step_syncs)
            total_loss += model(**batch).loss.detach()
            tokens += (batch["input_ids"] != pad_idx).sum().item()
    return total_loss, tokens
"""

EVALUATE_MAIN = """
import torch
from transformers import AutoModelForCausalLM

from evaluation import evaluate_model


def main(dataset, device="cuda"):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    model = model.to(device=device)
    print(evaluate_model(model, dataset, 0, device))
"""


def test_an_evaluation_helper_handed_a_moved_model_reads_a_token_count_every_batch(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"evaluation.py": EVALUATE, "main.py": EVALUATE_MAIN}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["evaluation.py:12 GPU303"]
    assert diagnostics[0].message == (
        '`(batch["input_ids"] != pad_idx).sum().item()` waits for the GPU every evaluation step (loop at line 9)'
    )


def test_an_evaluation_helper_handed_a_model_left_on_the_cpu_is_silent(tmp_path, monkeypatch):
    on_cpu = EVALUATE_MAIN.replace('def main(dataset, device="cuda"):', 'def main(dataset):\n    device = "cpu"')
    assert found(lint(write(tmp_path, {"evaluation.py": EVALUATE, "main.py": on_cpu}), monkeypatch, select=("GPU303",))) == []


SHARED = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
data = TensorDataset(torch.randn(100000, 4096), torch.randint(0, 10, (100000,)))
train_loader = DataLoader(data, batch_size=256, num_workers=4, pin_memory=True, persistent_workers=True)
val_loader = DataLoader(data, batch_size=256, num_workers=4, pin_memory=True, persistent_workers=True)


def accuracy(out, y):
    return (out.argmax(1) == y).float().mean().item()


for epoch in range(10):
    for x, y in train_loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        out = model(x)
        nn.functional.cross_entropy(out, y).backward()
        optimizer.step()
        optimizer.zero_grad()
        train_acc = accuracy(out, y)
    with torch.no_grad():
        for x, y in val_loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            val_acc = accuracy(model(x), y)
"""


def test_a_helper_the_training_and_validation_loops_share_waits_at_each_call(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": SHARED}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["train.py:25 GPU303", "train.py:29 GPU303"]
    assert diagnostics[0].message == (
        "`accuracy(out, y)` (`.item()` at train.py:15) waits for the GPU every training step (loop at line 19)"
    )


TRAINER = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, criterion, optimizer, data_loader, device=torch.device("cpu"), durations=False):
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.data_loader = data_loader
        self.device = device
        self.durations = durations
        self.steps = 0
        self.total_train_loss = {"train/loss": 0.0}

    def run(self):
        while self.steps < 1000:
            self._train_epoch()

    def _parse_batch(self, batch):
        inputs, targets = batch[0], batch[1]
        if isinstance(inputs, torch.Tensor):
            x = inputs.to(self.device)
        elif isinstance(inputs, (tuple, list)):
            x = [None if x is None else x.to(self.device) for x in inputs]
        else:
            raise ValueError("inputs")
        y = targets.to(self.device)
        if self.durations:
            return x, y, batch[2].to(self.device)
        return x, y

    def _train_step(self, batch):
        if self.durations:
            x, y, ds = self._parse_batch(batch)
        else:
            x, y = self._parse_batch(batch)
        y_ = self.model["generator"](x)
        loss = self.criterion["mse"](y_, y)
        self.optimizer["generator"].zero_grad()
        loss.backward()
        self.optimizer["generator"].step()
        self.total_train_loss["train/loss"] += loss.item()
        self.steps += 1

    def _train_epoch(self):
        for batch in self.data_loader["train"]:
            self._train_step(batch)


def main():
    device = torch.device("cuda")
    model = {"generator": nn.Linear(8, 8).to(device)}
    criterion = {"mse": nn.MSELoss().to(device)}
    optimizer = {"generator": torch.optim.Adam(model["generator"].parameters(), fused=True)}
    data = TensorDataset(torch.randn(100, 8), torch.randn(100, 8))
    loader = {"train": DataLoader(data, batch_size=10, num_workers=2, pin_memory=True, persistent_workers=True)}
    Trainer(model=model, criterion=criterion, optimizer=optimizer, data_loader=loader, device=device).run()
"""


def test_a_trainer_step_method_reads_a_loss_of_a_batch_parsed_into_tuples_of_either_length(tmp_path, monkeypatch):
    # ParallelWaveGAN's Trainer (tenth corpus): `_parse_batch` returns `x, y, ds` or `x, y`, its inputs moved as
    # `[None if x is None else x.to(self.device) for x in inputs]`: either way each name holds a GPU tensor
    diagnostics = lint(write(tmp_path, {"train.py": TRAINER}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["train.py:45 GPU303"]
    assert diagnostics[0].message == (
        "`loss.item()` waits for the GPU every training step (`_train_step` at line 35, run by the call at train.py:50)"
    )


def test_a_trainer_whose_batch_stays_on_the_host_or_reads_under_a_log_interval_is_silent(tmp_path, monkeypatch):
    on_host = TRAINER.replace("x.to(self.device)", "x").replace("inputs.to(self.device)", "inputs")
    on_host = on_host.replace("targets.to(self.device)", "targets").replace("batch[2].to(self.device)", "batch[2]")
    on_host = on_host.replace('nn.Linear(8, 8).to(device)', 'nn.Linear(8, 8)').replace("nn.MSELoss().to(device)", "nn.MSELoss()")
    on_host = on_host.replace('device = torch.device("cuda")', 'device = torch.device("cpu")')
    assert found(lint(write(tmp_path / "host", {"train.py": on_host}), monkeypatch, select=("GPU303",))) == []
    logged = TRAINER.replace(
        '        self.total_train_loss["train/loss"] += loss.item()\n',
        '        if self.steps % 100 == 0:\n            self.total_train_loss["train/loss"] += loss.item()\n',
    )
    assert found(lint(write(tmp_path / "logged", {"train.py": logged}), monkeypatch, select=("GPU303",))) == []


EVALUATING_TRAINER = TRAINER.replace(
    "    def _train_epoch(self):\n",
    "    @torch.no_grad()\n"
    "    def _eval_step(self, batch):\n"
    "        x, y = self._parse_batch(batch)\n"
    '        loss = self.criterion["mse"](self.model["generator"](x), y)\n'
    '        self.total_eval_loss["eval/loss"] += loss.item()\n'
    "\n"
    "    def _eval_epoch(self):\n"
    '        self.total_eval_loss = {"eval/loss": 0.0}\n'
    '        for batch in self.data_loader["dev"]:\n'
    "            self._eval_step(batch)\n"
    "\n"
    "    def _train_epoch(self):\n",
).replace(
    "            self._train_step(batch)\n",
    "            self._train_step(batch)\n            if self.steps % 1000 == 0:\n                self._eval_epoch()\n",
).replace('{"train": DataLoader(', '{"dev": DataLoader(data, batch_size=10), "train": DataLoader(')


def test_a_trainer_eval_step_method_its_dev_loop_calls_on_self_reads_every_evaluation_step(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": EVALUATING_TRAINER}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["train.py:45 GPU303", "train.py:52 GPU303"]  # not again at `self._eval_step(batch)`
    assert diagnostics[1].message == (
        "`loss.item()` waits for the GPU every evaluation step (`_eval_step` at line 49, run by the call at line 57)"
    )


def test_an_eval_step_method_called_under_an_interval_or_from_two_places_is_not_per_step_code(tmp_path, monkeypatch):
    guarded = EVALUATING_TRAINER.replace(
        "        for batch in self.data_loader[\"dev\"]:\n            self._eval_step(batch)\n",
        "        for i, batch in enumerate(self.data_loader[\"dev\"]):\n            if i % 100 == 0:\n                self._eval_step(batch)\n",
    )
    assert found(lint(write(tmp_path / "guarded", {"train.py": guarded}), monkeypatch, select=("GPU303",))) == ["train.py:45 GPU303"]
    twice = EVALUATING_TRAINER.replace("    def run(self):\n", "    def probe(self, batch):\n        self._eval_step(batch)\n\n    def run(self):\n")
    assert "train.py:55 GPU303" not in found(lint(write(tmp_path / "twice", {"train.py": twice}), monkeypatch, select=("GPU303",)))
