"""Issue 13's noise on the seventh corpus's fresh read, classes of one-off work and inherent copies, each a
fact of the semantic model (minimal shapes of our own):

- a learning-rate range test whose break bound is a parameter's default (`num_iter=100`) runs a short loop
  (`loop_bounds.shipped_bound`), unless a call in the module passes a large or unknown value;
- `torch.cuda.empty_cache()` in the periodic block that switches to evaluation (`model.eval()`, `torch.no_grad()`
  beside it) releases memory once per evaluation, between phases (`phases.starts_evaluation_beside`);
- `torch.FloatTensor(arr).to(device)` of host array data (a replay batch, an observation) makes the copy
  `torch.tensor(arr, device=...)` would make too (`host_arrays.is_host_array`).

Next to them, what stays: the same loops with a large bound, an `empty_cache()` at its own interval, a constant
list, a `range`, a size or an in-place initialised buffer built on the CPU and moved every step.
"""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis.loop_bounds import SHORT_LOOP, trip_count
from gpulint.analysis.model import SemanticModel
from tests.conftest import diagnostics, findings

RANGE_TEST = textwrap.dedent("""\
    import torch


    class Trainer:
        def lr_range_test(self, loader, end_lr, num_iter=100, alpha=0.05):
            tracking = {"loss": []}
            iteration = 0
            while iteration < num_iter:
                for x, y in loader:
                    loss = self.loss_fn(self.model(x.cuda()), y.cuda())
                    loss.backward()
                    if iteration == 0:
                        tracking["loss"].append(loss.item())
                    else:
                        tracking["loss"].append(alpha * loss.item() + (1 - alpha) * tracking["loss"][-1])
                    iteration += 1
                    if iteration == num_iter:
                        break
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            return tracking
""")


def inner_trips(source: str) -> int | None:
    model = SemanticModel(cst.parse_module(source), "train.py", source)
    [inner] = [loop for loop in model.loops if isinstance(loop, cst.For)]
    return trip_count(model, inner)


def test_a_range_test_bounded_by_a_parameter_default_is_a_short_loop():
    assert inner_trips(RANGE_TEST) == 102  # `iteration` from 0, `== 100` then break: at most 102 bodies
    assert findings(RANGE_TEST, select=("GPU303",)) == []
    # the notebook's own call passes the same bound
    assert findings(RANGE_TEST + "t = Trainer()\nt.lr_range_test(loader, end_lr=0.1, num_iter=100)\n", select=("GPU303",)) == []


def test_a_parameter_bound_that_a_call_raises_or_hides_stays_a_step_loop():
    long = RANGE_TEST + "t = Trainer()\nt.lr_range_test(loader, end_lr=0.1, num_iter=100000)\n"
    assert inner_trips(long) > SHORT_LOOP
    assert findings(long, select=("GPU303",)) == ["15:53 GPU303"]
    unknown = RANGE_TEST + "t = Trainer()\nt.lr_range_test(loader, 0.1, args.steps)\n"
    assert inner_trips(unknown) is None
    assert findings(unknown, select=("GPU303",)) == ["15:53 GPU303"]


EVAL_BLOCK = textwrap.dedent("""\
    import torch


    def train(cfg, model, optimizer, train_loader, val_loader, device):
        global_step = 0
        while global_step < cfg.max_steps:
            for batch in train_loader:
                loss = model(batch["x"].to(device), batch["y"].to(device))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                global_step += 1
                if global_step % cfg.eval_interval == 0:
                    model.eval()
                    if device == "cuda":
                        torch.cuda.empty_cache()
                    with torch.no_grad():
                        total = 0
                        for vb in val_loader:
                            total += model(vb["x"].to(device), vb["y"].to(device))
                    model.train()
                if global_step % 100 == 0:
                    torch.cuda.empty_cache()
""")


def test_empty_cache_at_the_switch_to_evaluation_is_silent_and_a_periodic_one_of_its_own_stays():
    [diagnostic] = diagnostics(EVAL_BLOCK, select=("GPU305",))
    assert (diagnostic.location.row, diagnostic.message) == (
        23, "`torch.cuda.empty_cache()` in the loop at line 7 syncs the device and empties the cache"
    )


def test_empty_cache_beside_no_grad_alone_is_a_phase_switch_too():
    source = EVAL_BLOCK.replace("                model.eval()\n", "").replace("                model.train()\n", "")
    assert findings(source, select=("GPU305",)) == ["21:17 GPU305"]


def test_empty_cache_every_step_stays_even_beside_an_evaluation_switch():
    # unguarded: it runs every step, whatever else the block does
    source = EVAL_BLOCK.replace("                    if device == \"cuda\":\n                        torch.cuda.empty_cache()\n", "")
    source = source.replace("            global_step += 1\n", "            global_step += 1\n            torch.cuda.empty_cache()\n")
    assert "13:13 GPU305" in findings(source, select=("GPU305",))


REPLAY = textwrap.dedent("""\
    import numpy as np
    import torch

    device = torch.device("cuda")


    class Agent:
        def update(self, memory, batch_size):
            for _ in range(100000):
                state, action, reward = memory.sample(batch_size)
                {line}
                loss = self.critic(x).mean()
                loss.backward()
                self.opt.step()
""")


def gpu202(line: str) -> list[str]:
    return findings(REPLAY.format(line=line), select=("GPU202",))


def test_legacy_constructor_of_host_array_data_is_silent():
    assert gpu202("x = torch.FloatTensor(state).to(device)") == []  # an element of a sampled replay batch
    assert gpu202("x = torch.FloatTensor(np.stack(action)).to(device)") == []
    assert gpu202("x = torch.FloatTensor(reward.reshape(-1, 1)).to(device)") == []
    assert gpu202("obs = np.asarray(state)\n            x = torch.cuda.FloatTensor(obs)") == []


def test_legacy_constructor_of_sizes_and_fills_stays():
    assert gpu202("x = torch.LongTensor(range(batch_size)).to(device)") == ["11:17 GPU202"]  # torch.arange(device=)
    assert gpu202("h, n = state.shape\n            x = torch.FloatTensor(n).to(device)") == ["12:17 GPU202"]  # a size
    assert gpu202("x = torch.FloatTensor(state).normal_().to(device)") == ["11:17 GPU202"]  # filled on the CPU


def test_legacy_constructor_of_other_data_is_silent_too():
    # A constant or a value not shown to be an int is data: `torch.tensor(..., device=)` copies it the same way.
    assert gpu202("x = torch.FloatTensor([0.2, 0.8]).cuda()") == []
    assert gpu202("x = torch.FloatTensor(data).cuda()") == []


PREDICT = textwrap.dedent("""\
    import sys

    import torch
    import torch.nn as nn
    from PIL import Image

    device = torch.device("cuda")
    model = build_model()
    if ckpt is not None:
        model.load_state_dict(torch.load(ckpt))
        model = nn.DataParallel(model)
        model.to(device)
    else:
        model = nn.DataParallel(model)
        model.to(device)
    with torch.no_grad():
        model = model.eval()
        for path in sys.argv[1:]:
            img = transform(Image.open(path)).unsqueeze(0)
            img = img.to(device)
            pred = model(img).max(1)[1].cpu().numpy()[0]
""")


def test_data_parallel_fed_one_image_at_a_time_is_silent():
    # `DataParallel` splits dimension 0: a batch of one runs on one GPU, there is nothing to spread
    assert findings(PREDICT, select=("GPU401",)) == []
    assert findings(PREDICT.replace("img = img.to(device)", "img = img[None].to(device)").replace(".unsqueeze(0)", ""), select=("GPU401",)) == []


# The script goes on to fine-tune the wrapper: a prediction-only script is silent whatever it feeds
# (`inference_tools.only_runs_inference`, tests/test_steps_that_wait_anyway.py).
FINE_TUNE = "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(img).sum().backward()\noptimizer.step()\n"


def test_data_parallel_fed_batches_or_handed_elsewhere_stays():
    batched = PREDICT.replace("for path in sys.argv[1:]:", "for batch in loader:").replace(
        "img = transform(Image.open(path)).unsqueeze(0)", "img = batch[0]"
    )
    assert findings(batched, select=("GPU401",)) == []  # batched prediction only: nothing to all-reduce
    assert findings(batched + FINE_TUNE, select=("GPU401",)) == ["11:13 GPU401", "14:13 GPU401"]
    # a script that only evaluates (here through a helper of unknown code) trains nothing to all-reduce
    handed = PREDICT + "evaluate(model, loader)\n"
    assert findings(handed, select=("GPU401",)) == []
    # a helper named for training may train the wrapped model: the wrap stays reported
    trained = PREDICT + "train_model(model, loader)\n"
    assert findings(trained, select=("GPU401",)) == ["11:13 GPU401", "14:13 GPU401"]
    # one forward of a batch next to the single image
    mixed = PREDICT + "        out = model(torch.stack(images).to(device))\n" + FINE_TUNE
    assert findings(mixed, select=("GPU401",)) == ["11:13 GPU401", "14:13 GPU401"]
