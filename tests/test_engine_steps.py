"""Step functions handed to ignite's `Engine` through a project factory of another module (eleventh corpus, class F:
FixMatch's `trainers.create_trainer(train_step, ...)` whose `trainers/basic.py` builds `Engine(train_step)`).

The step reads the loss on the host every iteration: reported as if `Engine(train_step)` were written in the caller.
Silent: a factory that hands the engine something else (a wrapper, another parameter), and a factory that only
stores the function.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

FACTORY = """
from ignite.engine import Engine


def create_trainer(train_step, output_names, model):
    trainer = Engine(train_step)
    return trainer
"""

MAIN = """
import torch
from torch import nn
from ignite.engine import Events

import trainers


def training(cfg):
    device = "cuda"
    model = nn.Linear(10, 2)
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()

    def train_step(engine, batch):
        model.train()
        optimizer.zero_grad()
        x, y = batch
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
        return {"loss": loss.item()}

    trainer = trainers.create_trainer(train_step, output_names=["loss"], model=model)
    trainer.run(range(10), max_epochs=10)


if __name__ == "__main__":
    training({})
"""


def test_a_step_function_handed_to_a_factory_that_builds_the_engine_is_run_every_iteration(tmp_path, monkeypatch):
    root = write(tmp_path, {"trainers/__init__.py": "from trainers.basic import create_trainer\n", "trainers/basic.py": FACTORY, "main.py": MAIN})
    (diagnostic,) = [d for d in lint(root, monkeypatch) if d.code == "GPU303"]
    assert (diagnostic.filename, diagnostic.location.row) == ("main.py", 23)
    assert diagnostic.message == "`loss.item()` waits for the GPU every training step (`train_step` at line 16, run by ignite for each batch)"


def test_a_keyword_argument_reaches_the_engine_too(tmp_path, monkeypatch):
    main = MAIN.replace("create_trainer(train_step, output_names", "create_trainer(train_step=train_step, output_names")
    root = write(tmp_path, {"trainers.py": FACTORY, "main.py": main})
    assert "main.py:23 GPU303" in found(lint(root, monkeypatch))


def test_a_factory_that_hands_the_engine_a_wrapper_is_not_followed(tmp_path, monkeypatch):
    factory = FACTORY.replace("from ignite.engine import Engine", "from functools import partial\nfrom ignite.engine import Engine")
    factory = factory.replace("Engine(train_step)", "Engine(partial(train_step, model=model))")
    root = write(tmp_path, {"trainers.py": factory, "main.py": MAIN})
    assert "GPU303" not in " ".join(found(lint(root, monkeypatch)))


def test_a_factory_that_only_stores_the_function_is_not_an_engine(tmp_path, monkeypatch):
    factory = """
    class Runner:
        def __init__(self, step):
            self.step = step


    def create_trainer(train_step, output_names, model):
        return Runner(train_step)
    """
    root = write(tmp_path, {"trainers.py": factory, "main.py": MAIN})
    assert "GPU303" not in " ".join(found(lint(root, monkeypatch)))


def test_an_engine_of_another_library_is_not_ignite(tmp_path, monkeypatch):
    factory = FACTORY.replace("from ignite.engine import Engine", "from mylib.engine import Engine")
    root = write(tmp_path, {"trainers.py": factory, "main.py": MAIN})
    assert "GPU303" not in " ".join(found(lint(root, monkeypatch)))


INITIALIZE = """
import torch
from torch import nn
import ignite.distributed as idist


def initialize(cfg):
    model = nn.Linear(10, 2)
    model.to(idist.device())
    model = idist.auto_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, optimizer
"""

GUARDED = """
import torch
from torch import nn
import ignite.distributed as idist

import trainers
import utils


def training(cfg):
    device = idist.device()
    model, optimizer = utils.initialize(cfg)

    def train_step(engine, batch):
        model.train()
        optimizer.zero_grad()
        x, y = batch
        if x.device != device:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return {"loss": loss.item()}

    trainer = trainers.create_trainer(train_step, output_names=["loss"], model=model)
    trainer.run(range(10), max_epochs=10)
"""


def test_a_step_reads_a_model_the_function_around_it_unpacks_from_a_project_factory_that_moves_it(tmp_path, monkeypatch):
    root = write(tmp_path, {"trainers.py": FACTORY, "utils.py": INITIALIZE, "main.py": GUARDED})
    assert "main.py:24 GPU303" in found(lint(root, monkeypatch))


def test_a_model_the_factory_leaves_on_the_cpu_keeps_the_step_silent(tmp_path, monkeypatch):
    initialize = INITIALIZE.replace("    model.to(idist.device())\n    model = idist.auto_model(model)\n", "")
    root = write(tmp_path, {"trainers.py": FACTORY, "utils.py": initialize, "main.py": GUARDED})
    assert "GPU303" not in " ".join(found(lint(root, monkeypatch)))


def test_an_unpacked_place_that_is_not_the_moved_model_is_not_a_gpu_module(tmp_path, monkeypatch):
    main = GUARDED.replace("model, optimizer = utils.initialize(cfg)", "optimizer, model = utils.initialize(cfg)")
    root = write(tmp_path, {"trainers.py": FACTORY, "utils.py": INITIALIZE, "main.py": main})
    assert "GPU303" not in " ".join(found(lint(root, monkeypatch)))


VIEWS = """
def interleave(x, batch, inverse=False):
    shape = x.shape
    axes = [batch, -1] if inverse else [-1, batch]
    return x.reshape(*axes, *shape[1:]).transpose(0, 1).reshape(-1, *shape[1:])


def deinterleave(x, batch):
    return interleave(x, batch, inverse=True)
"""


def test_a_helper_imported_by_name_and_called_only_in_the_step_closure_keeps_the_logits_on_the_gpu(tmp_path, monkeypatch):
    main = GUARDED.replace("import utils\n", "import utils\nfrom views import deinterleave\n")
    main = main.replace("loss = nn.functional.cross_entropy(model(x), y)", "logits = deinterleave(model(x), 2)\n        loss = logits.mean()")
    root = write(tmp_path, {"trainers.py": FACTORY, "utils.py": INITIALIZE, "views.py": VIEWS, "main.py": main})
    assert "main.py:26 GPU303" in found(lint(root, monkeypatch))


def test_an_imported_helper_that_copies_to_the_host_is_the_wait_not_the_read_of_its_result(tmp_path, monkeypatch):
    views = VIEWS + "\n\ndef to_host(x, batch):\n    return x.detach().cpu()\n"
    main = GUARDED.replace("import utils\n", "import utils\nfrom views import to_host\n")
    main = main.replace("loss = nn.functional.cross_entropy(model(x), y)", "loss = nn.functional.cross_entropy(model(x), y)\n        host = to_host(loss, 2)")
    main = main.replace('return {"loss": loss.item()}', 'return {"loss": host.item()}')
    root = write(tmp_path, {"trainers.py": FACTORY, "utils.py": INITIALIZE, "views.py": views, "main.py": main})
    # `.cpu()` inside `to_host` waits (reported at its call); `host.item()` reads a host copy
    assert [f for f in found(lint(root, monkeypatch)) if f.endswith("GPU303")] == ["main.py:23 GPU303"]
