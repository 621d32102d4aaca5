"""Training steps that generate a rollout every iteration (issue 13, twelfth corpus N5 (b), minimind's PPO/GRPO):
a model's `generate(...)` decodes token by token and checks its stopping criteria on the host after each, so the
loss, reward and KL reads of the small update after it are one more wait after hundreds (GPU303 stays silent).
The generation is reached directly, through a function of the same module, or through a method of a project
class in another module whose instance the step receives (`rollout_engine.rollout(...)`).

Negatives: a supervised step keeps its `loss.item()` finding; a step that generates only under
`if step % eval_every == 0:` keeps it; `generate` of a random source is not a generation.
"""

from __future__ import annotations

from tests.projects_helper import lint_written

PPO = """
import torch
from transformers import AutoModelForCausalLM


def train(loader, optimizer):
    policy = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    total = 0.0
    for step, batch in enumerate(loader):
        ids = batch["input_ids"].cuda()
        with torch.no_grad():
            rollout = policy.generate(ids, max_new_tokens=256, do_sample=True)
        for epoch in range(2):
            logits = policy(rollout).logits
            loss = -torch.log_softmax(logits, -1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(step, total)
"""


def test_loss_reads_of_a_step_that_generates_a_rollout_are_silent(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"train_ppo.py": PPO}, monkeypatch)
    assert not any("GPU303" in f for f in found)


MASKED = PPO.replace("            total += loss.item()\n", "            kept = logits[rollout > 0]\n")


def test_mask_indexing_in_a_step_that_generates_a_rollout_is_silent(tmp_path, monkeypatch):
    # GPU306 asks the same fact: one more wait after the rollout's per-token ones
    assert not any("GPU306" in f for f in lint_written(tmp_path, {"train_ppo.py": MASKED}, monkeypatch))
    supervised = MASKED.replace("policy.generate(ids, max_new_tokens=256, do_sample=True)", "ids")
    assert "train_ppo.py:19 GPU306" in lint_written(tmp_path, {"train_ppo.py": supervised}, monkeypatch)


def test_a_supervised_step_keeps_its_loss_read(tmp_path, monkeypatch):
    supervised = PPO.replace("policy.generate(ids, max_new_tokens=256, do_sample=True)", "ids")
    found = lint_written(tmp_path, {"train_ppo.py": supervised}, monkeypatch)
    assert "train_ppo.py:19 GPU303" in found


def test_a_step_that_generates_only_every_eval_every_steps_keeps_its_loss_read(tmp_path, monkeypatch):
    guarded = PPO.replace(
        "        with torch.no_grad():\n            rollout = policy.generate(ids, max_new_tokens=256, do_sample=True)\n",
        "        rollout = ids\n        if step % 500 == 0:\n            sample = policy.generate(ids, max_new_tokens=256)\n",
    )
    found = lint_written(tmp_path, {"train_ppo.py": guarded}, monkeypatch)
    assert "train_ppo.py:20 GPU303" in found


def test_generate_of_a_random_source_is_not_a_generation(tmp_path, monkeypatch):
    seeded = PPO.replace(
        "        with torch.no_grad():\n            rollout = policy.generate(ids, max_new_tokens=256, do_sample=True)\n",
        "        rng = torch.Generator(device='cuda')\n        noise = rng.generate(ids)\n        rollout = ids\n",
    )
    found = lint_written(tmp_path, {"train_ppo.py": seeded}, monkeypatch)
    assert "train_ppo.py:20 GPU303" in found


HELPER = """
import torch
from transformers import AutoModelForCausalLM


def rollout(policy, ids):
    with torch.no_grad():
        return policy.generate(ids, max_new_tokens=256, do_sample=True)


def train(loader, optimizer):
    policy = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    for step, batch in enumerate(loader):
        sequences = rollout(policy, batch["input_ids"].cuda())
        loss = -torch.log_softmax(policy(sequences).logits, -1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
"""


def test_a_step_that_generates_through_a_helper_of_its_module_is_silent(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"train_grpo.py": HELPER}, monkeypatch)
    assert not any("GPU303" in f for f in found)


ENGINE = """
import torch


class TorchRolloutEngine:
    def __init__(self, policy):
        self.policy = policy

    def rollout(self, ids, max_new_tokens):
        with torch.no_grad():
            return self.policy.generate(ids, max_new_tokens=max_new_tokens, do_sample=True)


class SeededSampler:
    def __init__(self):
        self.rng = torch.Generator()

    def draw(self, ids):
        return self.rng.generate(ids)


def create_rollout_engine(policy):
    return TorchRolloutEngine(policy)
"""

ENGINE_STEP = """
import torch
from transformers import AutoModelForCausalLM
from rollout_engine import SeededSampler, create_rollout_engine


def train_epoch(loader, rollout_engine, policy, optimizer):
    for step, batch in enumerate(loader):
        sequences = rollout_engine.rollout(batch["input_ids"].cuda(), max_new_tokens=512)
        loss = -torch.log_softmax(policy(sequences).logits, -1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())


def main(loader):
    policy = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    optimizer = torch.optim.AdamW(policy.parameters())
    train_epoch(loader, create_rollout_engine(policy), policy, optimizer)
"""


def test_a_step_that_generates_through_a_project_engine_it_receives_is_silent(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"rollout_engine.py": ENGINE, "train_ppo.py": ENGINE_STEP}, monkeypatch)
    assert not any("GPU303" in f for f in found)


def test_a_project_method_that_draws_from_a_random_source_is_not_a_generation(tmp_path, monkeypatch):
    sampled = ENGINE_STEP.replace("rollout_engine.rollout(batch[\"input_ids\"].cuda(), max_new_tokens=512)", "sampler.draw(batch[\"input_ids\"].cuda())")
    sampled = sampled.replace("def train_epoch(loader, rollout_engine,", "def train_epoch(loader, sampler,")
    found = lint_written(tmp_path, {"rollout_engine.py": ENGINE, "train_ppo.py": sampled}, monkeypatch)
    assert "train_ppo.py:14 GPU303" in found


EPOCHS = """
import torch
from transformers import VisionEncoderDecoderModel


def main(train_loader, eval_loader, optimizer):
    model = VisionEncoderDecoderModel.from_pretrained("microsoft/trocr-base-stage1").cuda()
    for epoch in range(10):
        model.train()
        train_loss = 0.0
        for batch in train_loader:
            outputs = model(**{k: v.cuda() for k, v in batch.items()})
            optimizer.zero_grad()
            outputs.loss.backward()
            optimizer.step()
            train_loss += outputs.loss.item()
        model.eval()
        with torch.no_grad():
            for batch in eval_loader:
                outputs = model.generate(batch["pixel_values"].cuda())
        print(train_loss)
"""


def test_training_steps_of_an_epoch_whose_evaluation_pass_generates_keep_their_read(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"trocr.py": EPOCHS}, monkeypatch)
    assert "trocr.py:16 GPU303" in found
