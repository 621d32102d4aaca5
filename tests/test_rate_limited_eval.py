"""GPU405 and an evaluation the training loop runs only every N steps (`few_samples.every_few_steps`): a few passes a
run against the run's training steps; both judges called every such finding they read on the fourteenth and
fifteenth corpora noise (x-transformers' six batches every 500 steps, a leaf classifier's validation every 100
iterations), none right. Negatives: the same evaluation run every step, and a per-epoch evaluation over a loader."""

from __future__ import annotations

import textwrap

from tests.conftest import findings

STEPS = textwrap.dedent("""\
    import torch
    import torchvision

    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for i in range(100000):
        x, y = next(train_batches)
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        GUARD
            model.eval()
            for vx, vy in val_loader:
                logits = model(vx.cuda())
                print((logits.argmax(-1) == vy.cuda()).float().mean())
            model.train()
""")


def test_an_evaluation_every_500_steps_is_silent():
    source = STEPS.replace("GUARD", "if (i + 1) % 500 == 0:")
    assert findings(source, select=("GPU405",)) == []
    logged = STEPS.replace("GUARD", "if i % EVAL_EVERY == 0 or i == 99999:")
    assert findings(logged, select=("GPU405",)) == []


def test_an_evaluation_every_step_stays_reported():
    source = STEPS.replace("GUARD", "if True:")
    assert findings(source, select=("GPU405",)) == ["16:22 GPU405"]


def test_an_evaluation_every_epoch_stays_reported():
    source = textwrap.dedent("""\
        import torch
        import torchvision

        model = torchvision.models.resnet50().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        for epoch in range(90):
            model.train()
            for x, y in train_loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            model.eval()
            for vx, vy in val_loader:
                logits = model(vx.cuda())
    """)
    assert findings(source, select=("GPU405",)) == ["16:18 GPU405"]


EPOCHS = textwrap.dedent("""\
    import torch
    import torchvision

    model = torchvision.models.resnet50().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(200):
        for x, y in train_loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        GUARD
            model.eval()
            for vx, vy in val_loader:
                logits = model(vx.cuda())
            model.train()
""")


def test_an_evaluation_every_few_epochs_is_a_thinned_per_epoch_one_and_stays_reported():
    # the guard's loop runs the epoch's training loop in its body: each skipped pass is an epoch of steps, not a step
    assert findings(EPOCHS.replace("GUARD", "if epoch % 20 == 0:"), select=("GPU405",)) == ["16:22 GPU405"]


def test_a_guard_of_an_epoch_loop_of_one_step_each_stays_a_sliver():
    # one full-batch step an epoch (no training loop inside): every 20 epochs is every 20 steps
    one_step = EPOCHS.replace(
        "    for x, y in train_loader:\n        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())\n"
        "        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n",
        "    loss = torch.nn.functional.cross_entropy(model(features), labels)\n    optimizer.zero_grad()\n"
        "    loss.backward()\n    optimizer.step()\n",
    )
    assert one_step != EPOCHS
    assert findings(one_step.replace("GUARD", "if epoch % 20 == 0:"), select=("GPU405",)) == []
