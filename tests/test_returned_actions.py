"""Twelfth corpus N5: a policy helper (`select_action(state)`) reads its action back to the host and returns it, and
every loop that calls it hands the returned action to `env.step(...)`, directly or through a method of its own.
The simulator needs the action to produce the next state: GPU303 is silent there, as for a read in the loop itself
(`analysis/returned_actions.py`). A loss the update helper returns for logging, a returned action no environment
steps with, and a read the helper keeps to itself stay reported."""

from __future__ import annotations

import textwrap

from tests.conftest import findings

AGENT = textwrap.dedent("""\
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn


    class Agent:
        def __init__(self, env):
            self.env = env
            self.device = torch.device("cuda")
            self.actor = nn.Sequential(nn.Linear(3, 4096), nn.ReLU(), nn.Linear(4096, 1)).to(self.device)
            self.opt = torch.optim.Adam(self.actor.parameters())

        def select_action(self, state):
            selected_action = self.actor(torch.as_tensor(state, device=self.device)).detach().cpu().numpy()
            return {returned}

        def step(self, action):
            next_state, reward, terminated, truncated, _ = self.env.step(action)
            return next_state, reward, terminated or truncated

        def update_model(self, state):
            loss = self.actor(torch.as_tensor(state, device=self.device)).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            return loss.item()

        def train(self, num_frames):
            state, _ = self.env.reset()
            losses = []
            for _ in range(num_frames):
                action = self.select_action(state)
                {stepping}
                losses.append(self.update_model(state))
                state = next_state


    Agent(gym.make("Pendulum-v1")).train(100000)
""")

STEP = "next_state, reward, done = self.step(action)"


def gpu303(returned: str = "selected_action", stepping: str = STEP) -> list[str]:
    return findings(AGENT.format(returned=returned, stepping=stepping), select=("GPU303",))


def test_action_returned_to_an_environment_step_is_silent_and_the_logged_loss_stays():
    assert gpu303() == ["27:16 GPU303"]  # only `loss.item()` of the update
    assert gpu303(stepping="next_state, reward, done, _, _ = self.env.step(action)") == ["27:16 GPU303"]
    assert gpu303(returned="np.clip(selected_action, -1.0, 1.0)") == ["27:16 GPU303"]


def test_action_not_stepped_or_not_returned_stays_reported():
    # the loop keeps the actions and steps nothing: the read is a habit, not the simulator's input
    assert gpu303(stepping="losses.append(action); next_state = state") == ["15:27 GPU303", "27:16 GPU303"]
    # the helper returns something else: its read is its own
    assert gpu303(returned="state") == ["15:27 GPU303", "27:16 GPU303"]
