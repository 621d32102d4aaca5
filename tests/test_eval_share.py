"""GPU405 by the evaluation's share of the run (`analysis/eval_share.py`): silent where the code shows a sliver (a
pass run once over a few samples, or beside the module's training), reported where the evaluation repeats or is
not shown to run once. Also `requires_grad=<parameter>` in a batching helper is no need for gradients
(`analysis/gradients.py`)."""

from __future__ import annotations

from tests.conftest import diagnostics, findings

GPU405 = {"select": ("GPU405",)}

DEMO = """\
import torch

model = Detector().cuda()
model.load_state_dict(torch.load("detector.pt"))
model.eval()
for ix, (images, targets) in enumerate(test_loader):
    {stop}
    outputs = model([im.cuda() for im in images])
    show(images[0], outputs[0]["boxes"].cpu())
"""


def test_a_one_off_pass_over_a_few_samples_is_a_sliver():
    # three batches shown with their boxes, once: a few forwards' bookkeeping
    assert findings(DEMO.format(stop="if ix == 3: break"), **GPU405) == []
    two_pairs = DEMO.replace("for ix, (images, targets) in enumerate(test_loader):\n    {stop}\n", "for ix in range(2):\n    images, targets = next(it)\n")
    assert findings(two_pairs, **GPU405) == []


def test_a_whole_pass_of_a_script_that_trains_nothing_is_reported():
    # an evaluation script: its run is the evaluation
    assert findings(DEMO.format(stop="pass"), **GPU405) == ["8:15 GPU405"]
    # a break after a hundred batches is no handful
    assert findings(DEMO.format(stop="if ix == 100: break"), **GPU405) == ["8:15 GPU405"]


STEPS = """\
import torch

model = Net().cuda()
max_iter = {steps}
model.train()
for i, (x, y) in enumerate(batch_gen.gen_train()):
    loss = criterion(model(x.cuda()), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if i > max_iter:
        break

model.eval()
for x, ids in batch_gen.gen_test():
    predictions.append(model(x.cuda()).cpu())
"""


def test_a_one_off_test_pass_after_many_training_steps_is_a_sliver():
    # one test pass after 1,000 training steps (a ~600-sample test set, judged noise)
    assert findings(STEPS.format(steps=1000), **GPU405) == []
    # a training loop the code does not bound
    assert findings(STEPS.format(steps=1000).replace("    if i > max_iter:\n        break\n", ""), **GPU405) == []


def test_a_one_off_test_pass_after_a_short_training_loop_is_reported():
    # 52 training steps: the test pass may be as long as the training
    assert findings(STEPS.format(steps=50), **GPU405) == ["16:24 GPU405"]


METHOD = """\
import torch


class Solver:
    def train(self):
        for epoch in range(self.num_epochs):
            self.unet.train(True)
            for images, gt in self.train_loader:
                loss = self.criterion(self.unet(images.cuda()), gt.cuda())
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        self.unet.eval()
        for images, gt in self.valid_loader:
            score += dice(self.unet(images.cuda()), gt.cuda())
"""


def test_a_test_pass_in_a_method_is_not_shown_to_run_once():
    # a method: whoever holds the solver may run it again (judged right: a U-Net's test pass)
    assert findings(METHOD, **GPU405) == ["15:27 GPU405"]


def test_a_per_epoch_validation_names_its_loop_in_the_help():
    source = METHOD.replace("        self.unet.eval()\n        for images", "            self.unet.eval()\n            for images").replace(
        "            score +=", "                score +="
    )
    [d] = diagnostics(source, **GPU405)
    assert d.location.row == 15
    assert d.help.endswith("; it runs on every pass of the loop at line 6")


BATCHIFY = """\
import torch


def batchify(instances, if_train=True):
    words = torch.zeros((len(instances), 50), requires_grad={flag}).long()
    return words.cuda()


def evaluate(model, instances):
    model.eval()
    for start in range(0, len(instances), 10):
        words = batchify(instances[start:start + 10], False)
        tags = model(words)
    return tags
"""


def test_requires_grad_given_by_a_parameter_is_no_need_for_gradients():
    # `requires_grad=if_train`: the evaluation passes `False`; the value is its callers', not a need of the loop
    assert findings(BATCHIFY.format(flag="if_train"), **GPU405) == ["13:16 GPU405"]
    assert findings(BATCHIFY.format(flag="False"), **GPU405) == ["13:16 GPU405"]


def test_requires_grad_switched_on_in_the_loop_still_needs_gradients():
    # a literal `True` (a saliency map's input), or a parameter rebound to it: the loop may differentiate the input
    assert findings(BATCHIFY.format(flag="True"), **GPU405) == []
    rebound = BATCHIFY.format(flag="if_train").replace("    words = torch.zeros", "    if_train = True\n    words = torch.zeros")
    assert findings(rebound, **GPU405) == []


EXPLAIN = """\
import torch
from torch.utils.data import DataLoader


class TabModel:
    def explain(self, X):
        self.network.eval()
        masks = []
        for data in DataLoader(X, batch_size=1024):
            explained, mask = self.network.{call}(data.cuda().float())
            masks.append(mask)
        return masks
"""


def test_a_forward_method_by_the_forward_convention_runs_the_model():
    # `self.network.forward_masks(data)`: TabNet's explanation pass over a whole data set, a method any caller runs
    assert findings(EXPLAIN.format(call="forward_masks"), **GPU405) == ["10:31 GPU405"]


def test_other_methods_of_the_model_are_no_forward():
    assert findings(EXPLAIN.format(call="reset_masks"), **GPU405) == []
    assert findings(EXPLAIN.format(call="forwarded"), **GPU405) == []
