"""GPU405 where the evaluated model runs somewhere other than the evaluation loop's own body
(`analysis/evaluation.py`): in a function of this module the loop calls (`loss = sentence_loss(s)`, whose body
runs the module's `model`), in a loop after the epoch loop whose body ends in `model.eval()`, or straight after
`.eval()` in a function that first trains a step and is called once per epoch (a full-graph GNN's `train()`)."""

from __future__ import annotations

from tests.conftest import diagnostics, findings

GPU405 = {"select": ("GPU405",)}

HELPER = """\
import torch

model = Net().cuda()


def sentence_loss(sent):
    logits = model(torch.tensor(sent).cuda())
    return criterion(logits, target)


for epoch in range(10):
    model.train()
    for sent in train_data:
        loss = sentence_loss(sent)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    for sent in dev_data:
        dev_loss += {call}.item()
"""


def test_a_helper_that_runs_the_module_model_is_followed():
    source = HELPER.format(call="sentence_loss(sent)")
    assert findings(source, **GPU405) == ["20:21 GPU405"]
    [d] = diagnostics(source, **GPU405)
    assert "(in `sentence_loss`, called here)" in d.message


def test_a_helper_under_no_grad_or_with_its_own_model_is_not_reported():
    guarded = HELPER.format(call="sentence_loss(sent)").replace("    for sent in dev_data:", "    with torch.no_grad():\n      for sent in dev_data:").replace(
        "        dev_loss +=", "        dev_loss +=")
    assert findings(guarded, **GPU405) == []
    inside = HELPER.format(call="sentence_loss(sent)").replace("    logits = model(", "    with torch.no_grad():\n        logits = model(")
    assert findings(inside, **GPU405) == []
    # `def sentence_loss(sent, model)`: whichever model the caller passes, not followed
    own = HELPER.format(call="sentence_loss(sent, other)").replace("def sentence_loss(sent):", "def sentence_loss(sent, model):")
    assert findings(own, **GPU405) == []


def test_a_helper_that_trains_is_not_an_evaluation():
    source = HELPER.format(call="step(sent)") + "\n\ndef step(sent):\n    loss = sentence_loss(sent)\n    loss.backward()\n    return loss\n"
    assert findings(source, **GPU405) == []


AFTER_EPOCHS = """\
import torch

model = Net().cuda()
for epoch in range(10):
    model.train()
    for x, y in train_loader:
        loss = criterion(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    print(epoch){back}

for x, y in test_loader:
    correct += (model(x.cuda()).argmax(1) == y.cuda()).sum()
"""


def test_a_test_loop_after_epochs_that_end_in_eval_mode():
    # in a function this module never calls (run from elsewhere, maybe once per sweep trial): not shown to run once
    inside = "import torch\n\n\ndef fit(model, train_loader, test_loader):\n" + "".join(
        f"    {line}\n" if line else "\n" for line in AFTER_EPOCHS.format(back="").splitlines()[2:]
    )
    assert findings(inside, **GPU405) == ["17:21 GPU405"]
    [d] = diagnostics(inside, **GPU405)
    assert d.help.endswith("(or `torch.inference_mode()`)")  # no loop around it that the code shows
    # called once in this module: its test pass is one pass beside the epochs (`analysis/eval_share.py`)
    assert findings(inside + "\n\nfit(Net(), train_loader, test_loader)\n", **GPU405) == []


def test_a_one_off_test_pass_after_the_epochs_is_a_sliver_of_the_run():
    # module-level code runs once: one pass of bookkeeping beside ten epochs of training (`analysis/eval_share.py`)
    assert findings(AFTER_EPOCHS.format(back=""), **GPU405) == []


def test_a_test_loop_after_epochs_that_switch_back_to_train_mode_is_not_reported():
    assert findings(AFTER_EPOCHS.format(back="\n    model.train()"), **GPU405) == []
    # `.eval()` under an `if`: the loop may end in training mode
    conditional = AFTER_EPOCHS.format(back="").replace("    model.eval()\n", "    if epoch % 2:\n        model.eval()\n")
    assert findings(conditional, **GPU405) == []


PER_CALL = """\
import torch
import torch.nn.functional as F

model = GCN(nfeat, nclass).cuda()


def train(epoch, features, adj):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss = F.nll_loss(output[idx_train], labels[idx_train])
    loss.backward()
    optimizer.step()
    if not fastmode:
        model.eval()
        output = model(features, adj)
    loss_val = F.nll_loss(output[idx_val], labels[idx_val]).item()
    scheduler.step()
    return loss.item(), loss_val


{calls}
"""


def test_a_training_function_that_validates_after_its_step_in_an_epoch_loop():
    # the step's forward runs elsewhere (a loss helper handed the model): the evaluation's share is not shown
    source = PER_CALL.format(calls="for epoch in range(200):\n    train(epoch, features, adj)").replace(
        "    output = model(features, adj)\n    loss = F.nll_loss(output[idx_train], labels[idx_train])\n",
        "    loss = node_loss(model, features, adj, idx_train)\n",
    )
    assert findings(source, **GPU405) == ["15:18 GPU405"]
    [d] = diagnostics(source, **GPU405)
    assert "on every call of `train` (called in the loop at line 22)" in d.message


def test_a_validation_forward_beside_a_step_of_the_same_model_is_a_sliver():
    # `train()` runs `model(features, adj)` for its step, then once more in eval mode: one forward's bookkeeping
    # beside the step's forward, backward and update (a full-graph GCN's validation, judged noise)
    source = PER_CALL.format(calls="for epoch in range(200):\n    train(epoch, features, adj)")
    assert findings(source, **GPU405) == []


def test_an_evaluation_function_called_once_or_without_a_training_step_is_not_reported():
    # called once, after training
    assert findings(PER_CALL.format(calls="train(0, features, adj)"), **GPU405) == []
    # no training step before the `.eval()`: the output may be what a caller backpropagates (frozen batch norm)
    no_step = PER_CALL.replace("    loss.backward()\n    optimizer.step()\n", "")
    assert findings(no_step.format(calls="for epoch in range(200):\n    train(epoch, features, adj)"), **GPU405) == []
    # backpropagated after the `.eval()`
    after = PER_CALL.replace("    scheduler.step()\n", "    loss_val.backward()\n")
    assert findings(after.format(calls="for epoch in range(200):\n    train(epoch, features, adj)"), **GPU405) == []
    guarded = PER_CALL.replace("        output = model(features, adj)\n    loss_val", "        with torch.no_grad():\n            output = model(features, adj)\n    loss_val")
    assert findings(guarded.format(calls="for epoch in range(200):\n    train(epoch, features, adj)"), **GPU405) == []
