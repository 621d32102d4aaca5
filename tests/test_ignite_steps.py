"""Per-step host reads in ignite and Fabric code (issue 14, ninth corpus class B): `idist.auto_model` places the
model, `create_supervised_trainer(output_transform=...)` runs every iteration with its arguments on the device,
a step function defined inside a factory sees the factory's parameters as its callers give them, and
`fabric.setup(model, optimizer)` returns the model on the device. `idist.auto_dataloader` builds a DataLoader."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from tests.conftest import diagnostics, findings, fixed

TRAINER_FACTORY = """\
    import torch
    from torch import nn
    import ignite.distributed as idist
    from ignite.engine import Engine


    def initialize():
        model = idist.auto_model(nn.Linear(10, 2))
        optimizer = idist.auto_optim(torch.optim.SGD(model.parameters(), lr=0.1))
        return model, optimizer


    def create_trainer(model, optimizer):
        def train_step(engine, batch):
            model.train()
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()
            return {"batch loss": loss.item()}

        return Engine(train_step)


    def training(loader):
        model, optimizer = initialize()
        trainer = create_trainer(model, optimizer)
        trainer.run(loader, max_epochs=5)
    """


def test_ignite_step_in_a_factory_reads_the_auto_model_loss_every_step():
    (found,) = diagnostics(TRAINER_FACTORY, select=("GPU303",))
    assert (found.location.row, found.code) == (19, "GPU303")
    assert found.message == "`loss.item()` waits for the GPU every training step (`train_step` at line 14, run by ignite for each batch)"


def test_ignite_step_stays_silent_when_the_read_is_logged_every_n_iterations():
    source = TRAINER_FACTORY.replace(
        '            return {"batch loss": loss.item()}\n',
        '            if engine.state.iteration % 100 == 0:\n                print(loss.item())\n',
    )
    assert findings(source, select=("GPU303",)) == []


def test_a_factory_parameter_given_a_cpu_model_is_not_on_the_gpu():
    # Without `auto_model` (and no other move) the model stays on the CPU: nothing waits for a GPU.
    source = TRAINER_FACTORY.replace("idist.auto_model(nn.Linear(10, 2))", "nn.Linear(10, 2)")
    assert findings(source, select=("GPU303",)) == []


OUTPUT_TRANSFORM = """\
    import torch
    from torch import nn
    from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer

    model = nn.Linear(10, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = create_supervised_trainer(
        model, optimizer, nn.CrossEntropyLoss(), device="cuda",
        output_transform=lambda x, y, y_pred, loss: {"batch loss": loss.item()},
    )
    evaluator = create_supervised_evaluator(model, device="cuda", output_transform=lambda x, y, y_pred: (y_pred, y))
    trainer.run(range(10), max_epochs=5)
    """


def test_output_transform_of_a_supervised_trainer_runs_every_iteration():
    (found,) = diagnostics(OUTPUT_TRANSFORM, select=("GPU303",))
    assert (found.location.row, found.location.column, found.code) == (9, 64, "GPU303")
    assert found.message == "`loss.item()` waits for the GPU every training step (the lambda at line 9, run by ignite for each batch)"


def test_output_transform_on_a_cpu_trainer_is_silent():
    source = OUTPUT_TRANSFORM.replace('.cuda()', "").replace('device="cuda"', 'device="cpu"')
    assert findings(source, select=("GPU303",)) == []


FABRIC_LOOP = """\
    import torch
    import lightning as L
    from torch import nn


    def train(fabric, model, optimizer, batches):
        for x, y in batches:
            x, y = x.to(fabric.device), y.to(fabric.device)
            loss = nn.functional.cross_entropy(model(x), y)
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            print({"loss": loss.item()})


    def main():
        fabric = L.Fabric(accelerator="cuda")
        model = nn.Linear(10, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model, optimizer = fabric.setup(model, optimizer)
        train(fabric, model, optimizer, [(torch.randn(8, 10), torch.zeros(8, dtype=torch.long))] * 100)
    """


def test_fabric_setup_model_handed_to_a_training_function_is_on_the_gpu():
    (found,) = diagnostics(FABRIC_LOOP, select=("GPU303",))
    assert (found.location.row, found.code) == (13, "GPU303")
    assert found.message.startswith("`loss.item()` waits for the GPU every training step (loop at line 7)")


def test_fabric_setup_without_moving_to_the_device_is_silent():
    source = FABRIC_LOOP.replace("fabric.setup(model, optimizer)", "fabric.setup(model, optimizer, move_to_device=False)")
    source = source.replace("x.to(fabric.device), y.to(fabric.device)", "x, y")
    assert findings(source, select=("GPU303",)) == []


AUTO_DATALOADER = """\
    import torch
    from torch import nn
    import ignite.distributed as idist
    from ignite.engine import create_supervised_trainer
    from torchvision.datasets import CIFAR10

    device = idist.device()
    model = idist.auto_model(nn.Linear(10, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = idist.auto_dataloader(CIFAR10("data", train=True), batch_size=512, num_workers=4, shuffle=True)
    trainer = create_supervised_trainer(model, optimizer, nn.CrossEntropyLoss(), device=device)
    trainer.run(train_loader, max_epochs=24)
    """


def test_auto_dataloader_workers_restart_every_epoch_of_an_ignite_run():
    # GPU104 only: `auto_dataloader` pins on CUDA by itself and divides the batch among processes (GPU102/103 silent).
    assert findings(AUTO_DATALOADER) == ["10:16 GPU104"]
    # `auto_dataloader` hands its keyword arguments to `DataLoader`: the fix is the same keyword.
    assert fixed(AUTO_DATALOADER, select=("GPU104",)).splitlines()[9] == (
        'train_loader = idist.auto_dataloader(CIFAR10("data", train=True), batch_size=512, num_workers=4, shuffle=True, persistent_workers=True)'
    )


def test_auto_dataloader_with_persistent_workers_is_silent():
    source = AUTO_DATALOADER.replace("shuffle=True)", "shuffle=True, persistent_workers=True)")
    assert findings(source) == []



def test_a_closure_that_no_framework_runs_keeps_its_old_reading():
    # Only a framework's step function reads its factory's parameters as the callers give them: a helper nested
    # in `test(predictor, ...)` (OGB's `test_split`) reads `predictor` as before (not known to be a GPU model).
    source = textwrap.dedent("""\
        import torch
        from torch import nn
        from ignite.engine import Engine


        def test(predictor, x):
            def test_split():
                return predictor(x)

            return test_split()


        def create_trainer(model):
            def train_step(engine, batch):
                return model(batch)

            return Engine(train_step)


        test(nn.Linear(8, 1).cuda(), torch.randn(4, 8).cuda())
        create_trainer(nn.Linear(8, 1).cuda())
        """)
    model = SemanticModel(cst.parse_module(source), "train.py", source)
    called = {model.code(call.func): call.func for call in model.calls if model.code(call.func) in ("predictor", "model")}
    assert not model.residency.is_gpu_module(called["predictor"])
    assert model.residency.is_gpu_module(called["model"])
