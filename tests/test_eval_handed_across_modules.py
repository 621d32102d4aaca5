"""GPU405 across modules: an evaluation helper of one module (`utils.evaluate(model, dataset, args)`) that runs the
model it is handed in a loop, called by a training script of another module right after `model.eval()` without
`torch.no_grad()` (SASRec's layout: `analysis/evaluated_params.py`). The finding sits in the helper, naming the call."""

from __future__ import annotations

from tests.projects_helper import lint, lint_written

UTILS = """\
    import numpy as np
    import torch


    {decorator}def evaluate(model, dataset, args):
        users = range(1, len(dataset) + 1)
        hits = 0.0
        for u in users:
            seq = np.zeros([args.maxlen], dtype=np.int32)
            predictions = -model.predict(np.array([u]), np.array([seq]), np.arange(101))
            rank = predictions[0].argsort().argsort()[0].item()
            hits += rank < 10
        return hits / len(users)
"""
TRAIN = """\
    import torch
    from model import SASRec
    from utils import evaluate


    def main(args, dataset, sampler, num_batch):
        model = SASRec(args).to("cuda")
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for epoch in range(1, args.num_epochs + 1):
            for step in range(num_batch):
                loss = model(*sampler.next_batch()).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            {guard}
                model.eval()
                {call}
                model.train()
"""
MODEL = """\
    import torch


    class SASRec(torch.nn.Module):
        def __init__(self, args):
            super().__init__()
            self.item_emb = torch.nn.Embedding(100000, 64)
            self.encoder = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 1), 2)

        def forward(self, u, seq, pos, neg):
            return self.encoder(self.item_emb(seq))

        def predict(self, u, seq, items):
            return self.encoder(self.item_emb(torch.as_tensor(seq).cuda()))[:, -1] @ self.item_emb(torch.as_tensor(items).cuda()).T
"""
EVERY_20_EPOCHS = "if epoch % 20 == 0:"
CALL = "t_test = evaluate(model, dataset, args)"


def _project(tmp_path, monkeypatch, decorator="", guard=EVERY_20_EPOCHS, call=CALL, train=TRAIN) -> list[str]:
    files = {
        "utils.py": UTILS.format(decorator=decorator),
        "train.py": train.format(guard=guard, call=call),
        "model.py": MODEL,
    }
    return [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU405" in f]


def test_a_helper_handed_a_model_in_eval_mode_every_few_epochs_is_reported_in_the_helper(tmp_path, monkeypatch):
    assert _project(tmp_path, monkeypatch) == ["utils.py:10 GPU405"]
    (diagnostic,) = [d for d in lint(tmp_path, monkeypatch) if d.code == "GPU405"]
    assert diagnostic.message == (
        "`model` runs in a loop of `evaluate` with autograd on: the call at train.py:17 hands it a model in eval mode, "
        "outside `torch.no_grad()`"
    )
    assert diagnostic.help.endswith("; it runs on every few passes of the epoch loop at train.py:9")


def test_every_epoch_too(tmp_path, monkeypatch):
    assert _project(tmp_path, monkeypatch, guard="if True:") == ["utils.py:10 GPU405"]


def test_a_helper_under_no_grad_or_called_under_it_is_silent(tmp_path, monkeypatch):
    assert _project(tmp_path, monkeypatch, decorator="@torch.no_grad()\n    ") == []
    with_call = "with torch.no_grad():\n                    " + CALL
    assert _project(tmp_path / "call", monkeypatch, call=with_call) == []


def test_a_model_not_in_eval_mode_at_the_call_is_not_followed(tmp_path, monkeypatch):
    # `model.train()` before the call: the helper may well be a training step; nothing says it evaluates
    train_first = "model.train()\n                " + CALL
    assert _project(tmp_path, monkeypatch, call=train_first) == []


def test_an_evaluation_every_few_steps_is_a_sliver(tmp_path, monkeypatch):
    # the guard sits in the step loop: a pass every 500 steps (both judges: noise, x-transformers' shape)
    step_guard = TRAIN.replace(
        "            {guard}\n                model.eval()\n                {call}\n                model.train()\n",
        "                {guard}\n                    model.eval()\n                    {call}\n                    model.train()\n",
    )
    assert step_guard != TRAIN
    assert _project(tmp_path, monkeypatch, guard="if step % 500 == 0:", train=step_guard) == []


def test_a_one_off_pass_after_training_is_a_sliver_but_an_evaluation_script_is_not(tmp_path, monkeypatch):
    once = TRAIN.replace("            {guard}\n                model.eval()", "        {guard}\n        model.eval()").replace(
        "                {call}\n                model.train()\n", "        {call}\n"
    )
    assert once != TRAIN
    assert _project(tmp_path, monkeypatch, guard="", train=once) == []
    script = """\
        import torch
        from model import SASRec
        from utils import evaluate


        def main(args, dataset):
            model = SASRec(args).to("cuda")
            model.load_state_dict(torch.load(args.state_dict_path))
            model.eval()
            print(evaluate(model, dataset, args))
        {guard}{call}
    """
    assert _project(tmp_path / "script", monkeypatch, guard="", call="", train=script) == ["utils.py:10 GPU405"]


def test_a_helper_that_trains_the_model_it_is_handed_is_no_evaluation(tmp_path, monkeypatch):
    training_helper = TRAIN
    files_utils = UTILS.replace("hits += rank < 10", "hits += rank < 10\n            predictions.sum().backward()")
    files = {"utils.py": files_utils.format(decorator=""), "train.py": training_helper.format(guard=EVERY_20_EPOCHS, call=CALL), "model.py": MODEL}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU405" in f] == []
