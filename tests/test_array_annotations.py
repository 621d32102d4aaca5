"""Twelfth corpus N2: `torch.FloatTensor(state).to(device)` where an annotation says `state` is a NumPy array (a gym
observation, `state: np.ndarray`) or a string-keyed item of a replay minibatch (`samples["obs"]` with
`def sample_batch(self) -> Dict[str, np.ndarray]`). The bytes must cross to the GPU whichever constructor builds the
tensor: GPU202 is silent (`analysis/array_annotations.py`, used by `host_arrays.is_host_array`). Unannotated,
tensor-annotated or differently annotated values are data too (round 12, `analysis/legacy_constructors.py`)."""

from __future__ import annotations

import textwrap

from tests.conftest import findings

AGENT = textwrap.dedent("""\
    from typing import Dict, Optional

    import numpy as np
    import torch
    import torch.nn.functional as F

    device = torch.device("cuda")


    class Buffer:
        def sample_batch(self) -> {returns}:
            idxs = np.random.choice(self.size, size=32)
            return dict(obs=self.obs[idxs], rews=self.rews[idxs])


    class Agent:
        def select_action(self, state: {annotation}):
            return self.actor({select}).detach().cpu().numpy()

        def critic_loss(self, samples: {mapping}):
            x = {critic}
            return self.critic(x).mean()

        def update_model(self):
            samples = self.memory.sample_batch()
            x = {update}
            loss = self.critic(x).mean() + self.critic_loss(samples)
            loss.backward()
            self.opt.step()

        def train(self, env, frames):
            state = env.reset()
            for _ in range(frames):
                action = self.select_action(state)
                state, reward, done = env.step(action)
                self.update_model()
""")

DEFAULTS = {
    "returns": "Dict[str, np.ndarray]",
    "annotation": "np.ndarray",
    "select": "torch.FloatTensor(state).to(device)",
    "mapping": "Dict[str, np.ndarray]",
    "critic": 'torch.FloatTensor(samples["obs"]).to(device)',
    "update": 'torch.FloatTensor(samples["rews"]).to(device)',
}


def gpu202(**changes: str) -> list[str]:
    return findings(AGENT.format(**{**DEFAULTS, **changes}), select=("GPU202",))


def test_legacy_constructor_of_annotated_host_arrays_is_silent():
    assert gpu202() == []
    assert gpu202(annotation="Optional[np.ndarray]") == []
    assert gpu202(annotation="np.ndarray | None") == []
    assert gpu202(returns="dict[str, np.ndarray]", mapping="dict[str, np.ndarray]") == []


def test_unannotated_or_tensor_annotated_values_are_data_too():
    # Round 12: whatever the annotation says, one argument that is not an int is data for a legacy constructor,
    # and data crosses to the GPU whichever constructor builds it (analysis/legacy_constructors.py).
    assert gpu202(annotation="torch.Tensor") == []
    assert gpu202(annotation="list") == []
    assert gpu202(returns="dict") == []
    tensors = "Dict[str, torch.Tensor]"
    assert gpu202(returns=tensors, mapping=tensors) == []
    assert gpu202(update="torch.FloatTensor(samples[key]).to(device)") == []


def test_sizes_filled_every_step_stay_reported_beside_annotated_arrays():
    assert gpu202(update="torch.FloatTensor([0.2, 0.8]).to(device)") == []  # a constant is data
    assert gpu202(update="torch.FloatTensor(32, 4).normal_().to(device)") == []  # 128 numbers: too small to matter
    assert gpu202(update="torch.FloatTensor(self.size, 4).normal_().to(device)") == ["26:13 GPU202"]
