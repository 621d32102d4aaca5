"""Loops that step a collection of environments every iteration (`analysis/environment_loops.py`): their host reads
wait for a GPU that idled while the environments stepped (about 2 ms an Atari step with frame skip and
preprocessing, bench/results/cost_facts.md section 9), so GPU303/GPU306 leave them out. Minimal shapes of our own
after the Pong policy-gradient loops of the twenty-second corpus (32 Atari environments behind an experience
source, a training step once per batch of transitions; a rollout that steps 16 environments one by one); a loop of
one environment keeps its findings."""

from __future__ import annotations

from tests.conftest import findings

DEFAULT = {"select": ("GPU303", "GPU306"), "rule_options": ()}

SOURCE_LOOP = """\
import gym
import ptan
import torch
from torch import nn

device = torch.device("cuda")
net = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Flatten(), nn.Linear(12800, 6)).to(device)
optimizer = torch.optim.Adam(net.parameters())
envs = [gym.make("PongNoFrameskip-v4") for _ in range(32)]
agent = ptan.agent.PolicyAgent(net, device=device)
exp_source = ptan.experience.ExperienceSourceFirstLast(envs, agent, gamma=0.99)
batch = []
for step_idx, exp in enumerate(exp_source):
    batch.append(exp)
    if len(batch) < 128:
        continue
    states = torch.stack([torch.as_tensor(e.state) for e in batch]).to(device)
    loss = net(states).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    grad_max = 0.0
    for p in net.parameters():
        grad_max = max(grad_max, p.grad.abs().max().item())
    print(loss.item(), grad_max)
    batch.clear()
"""

ROLLOUT = """\
import torch
from torch import nn

device = torch.device("cuda")
net = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Flatten(), nn.Linear(12800, 7)).to(device)


def iterate_batches(envs, obs):
    while True:
        values = []
        for n in range(8):
            obs_v = torch.as_tensor(obs).to(device)
            logits_v = net(obs_v)
            actions = logits_v[:, :6].softmax(1).multinomial(1).cpu().numpy()
            for d in range(4):
                values.append(logits_v[:, 6].sum().item())
            for e_idx, e in enumerate(envs):
                obs[e_idx], r, done, _ = e.step(actions[e_idx])
        yield values
"""


def test_reads_of_a_training_step_fed_by_many_environments_are_left_out():
    assert findings(SOURCE_LOOP, **DEFAULT) == []


def test_the_same_step_fed_by_one_environment_keeps_its_finding():
    one = SOURCE_LOOP.replace('envs = [gym.make("PongNoFrameskip-v4") for _ in range(32)]', 'env = gym.make("PongNoFrameskip-v4")')
    one = one.replace("ExperienceSourceFirstLast(envs,", "ExperienceSourceFirstLast(env,")
    assert findings(one, **DEFAULT) == ["24:34 GPU303"]


def test_a_vectorized_environment_stepped_every_iteration_counts():
    vectorized = SOURCE_LOOP.replace(
        'envs = [gym.make("PongNoFrameskip-v4") for _ in range(32)]', 'envs = gym.vector.make("PongNoFrameskip-v4", num_envs=16)'
    )
    assert findings(vectorized, **DEFAULT) == []


def test_reads_in_a_rollout_that_steps_each_environment_are_left_out():
    assert findings(ROLLOUT, **DEFAULT) == []
    indexed = ROLLOUT.replace("for e_idx, e in enumerate(envs):", "for e_idx in range(len(envs)):")
    assert findings(indexed.replace("= e.step(", "= envs[e_idx].step("), **DEFAULT) == []


def test_a_rollout_that_steps_no_environment_keeps_its_findings():
    # the loop over the collection only counts the environments: nothing is stepped, the reads keep their evidence
    counted = ROLLOUT.replace("obs[e_idx], r, done, _ = e.step(actions[e_idx])", "obs[e_idx] = len(e)")
    assert findings(counted, **DEFAULT) == ["14:23 GPU303", "16:31 GPU303"]


def test_a_copy_of_the_gradients_in_such_a_loop_stays_reported():
    # the Pong A2C loop's gradient statistics: every parameter's gradient copied to the host each training step,
    # megabytes and numpy work on them, whatever the environments take (a clear label of the twenty-second corpus)
    copied = SOURCE_LOOP.replace(
        "    optimizer.step()\n",
        "    optimizer.step()\n    grads = [p.grad.cpu().numpy() for p in net.parameters()]\n    print(sum(float(abs(g).max()) for g in grads))\n",
    )
    assert findings(copied, **DEFAULT) == ["22:14 GPU303"]
    # a number read from each gradient is a wait like the others: left out
    read = copied.replace("[p.grad.cpu().numpy() for p in net.parameters()]", "[p.grad.abs().max().item() for p in net.parameters()]")
    assert findings(read, **DEFAULT) == []
