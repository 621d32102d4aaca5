"""Fifteenth corpus: reads GPU303 reported whose value the host needs, or that read no GPU value at all.

* PyG's data objects carry sizes as Python ints (`batch.batch_size` a sampler's loader sets, `num_graphs`,
  `num_nodes`, `num_sampled_nodes`): slicing with one waits for nothing (`analysis/graph_data.py`). A slice bound
  that is a tensor of the batch (`batch.ptr[1]`) stays reported, as does the same attribute outside PyG.
* An agent's acting method (`explore`, `get_action`) that returns its read action, called from another module's
  episode loop that hands the action to `env.step(...)` (`analysis/returned_actions.py`, `needed_results`). A
  returned read that no caller steps an environment with stays reported.
* A greedy decode inside an evaluation step: each token is read to decide whether the decode goes on
  (`if top.item() == EOS: break`); its reads are the decode's. A read inside an inner loop that decides nothing
  stays reported."""

from __future__ import annotations

import textwrap

from tests.conftest import findings
from tests.projects_helper import lint_written

PYG = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    {imports}

    device = torch.device("cuda")
    model = torch.nn.Linear(128, 40).to(device)
    optimizer = torch.optim.Adam(model.parameters())


    def train(loader):
        for batch in loader:
            optimizer.zero_grad()
            batch = batch.to(device)
            out = model(batch.x)
            out = out[:{bound}]
            loss = F.cross_entropy(out, batch.y[:{bound}])
            loss.backward()
            optimizer.step()
""")

PYG_IMPORTS = "from torch_geometric.loader import NeighborLoader"


def pyg(bound: str, imports: str = PYG_IMPORTS) -> list[str]:
    return findings(PYG.format(bound=bound, imports=imports), select=("GPU303",))


def test_pyg_size_attributes_are_host_numbers():
    assert pyg("batch.batch_size") == []
    assert pyg("batch.num_sampled_nodes[0]") == []
    assert pyg("batch.num_graphs") == []


def test_a_tensor_bound_or_a_batch_outside_pyg_stays_reported():
    assert pyg("batch.ptr[1]") == ["15:15 GPU303"]  # `ptr` is a tensor of the batch, moved with it
    assert pyg("batch.batch_size", imports="import numpy as np") == ["15:15 GPU303"]


BASE = """\
    class BaseAgent:
        def explore(self, state):
            raise NotImplementedError

        def learn(self):
            loss = self.calc_loss()
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()

        def train_episode(self):
            state = self.env.reset()
            done = False
            while not done:
                action = self.explore(state)
                {stepping}
                self.learn()
"""

AGENT = """\
    import gym
    import torch
    import torch.nn as nn

    from base import BaseAgent


    class Agent(BaseAgent):
        def __init__(self):
            self.env = gym.make("Breakout-v4")
            self.device = torch.device("cuda")
            self.policy = nn.Sequential(nn.Linear(4, 4096), nn.ReLU(), nn.Linear(4096, 6)).to(self.device)
            self.optim = torch.optim.Adam(self.policy.parameters())

        def explore(self, state):
            state = torch.as_tensor(state, device=self.device).float()
            with torch.no_grad():
                action = self.policy(state).argmax()
            return action.item()

        def calc_loss(self):
            return self.policy(torch.randn(64, 4, device=self.device)).pow(2).mean()


    Agent().train_episode()
"""


def agent(tmp_path, monkeypatch, stepping: str) -> list[str]:
    files = {"base.py": BASE.format(stepping=stepping), "agent.py": AGENT}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU303")]


def test_action_returned_to_another_modules_environment_loop_is_silent(tmp_path, monkeypatch):
    assert agent(tmp_path, monkeypatch, "state, reward, done, _ = self.env.step(action)") == []


def test_returned_read_no_caller_steps_an_environment_with_stays_reported(tmp_path, monkeypatch):
    stepping = "self.actions.append(action); done = len(self.actions) > 100"
    assert agent(tmp_path, monkeypatch, stepping) == ["agent.py:19 GPU303"]


DECODE = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    device = torch.device("cuda")
    encoder = nn.GRU(256, 1024).to(device)
    decoder = nn.GRU(256, 1024).to(device)
    embed = nn.Embedding(5000, 256).to(device)
    head = nn.Linear(1024, 5000).to(device)
    EOS = 1


    def evaluate(pairs, vocab):
        for source in pairs:
            _, hidden = encoder(embed(source.to(device)).unsqueeze(1))
            token = torch.zeros(1, 1, dtype=torch.long, device=device)
            words = []
            for _ in range(20):
                out, hidden = decoder(embed(token), hidden)
                _, top = head(out).topk(1)
                {body}
                token = top.view(1, 1).detach()
            print(" ".join(words))
""")


def decode(body: str) -> list[str]:
    return findings(DECODE.format(body=body), select=("GPU303",))


def test_greedy_decode_token_read_to_stop_is_silent():
    body = "if top.item() == EOS:\n                break\n            words.append(vocab[top.item()])"
    assert decode(body) == []


def test_inner_loop_read_that_decides_nothing_stays_reported():
    assert decode("words.append(str(top.item()))") == ["20:30 GPU303"]


ONE_BATCH = textwrap.dedent("""\
    import torch
    import torchvision
    from torch.utils.data import DataLoader

    device = torch.device("cuda")
    model = torchvision.models.resnet50().to(device)
    test_data = torchvision.datasets.ImageFolder("data/test", transform=torchvision.transforms.ToTensor())
    test_set = DataLoader(dataset=test_data, batch_size={size})
    with torch.no_grad():
        for num, (images, labels) in enumerate(test_set):
            images, labels = images.to(device), labels.to(device)
            correct = (model(images).argmax(1) == labels).float().mean()
            print("Accuracy:", correct.item())
""")


def one_batch(size: str) -> list[str]:
    return findings(ONE_BATCH.format(size=size), select=("GPU303",))


def test_evaluation_over_a_loader_of_one_batch_reads_once_per_pass():
    assert one_batch("len(test_data)") == []


def test_evaluation_over_a_loader_of_many_batches_stays_reported():
    assert one_batch("64") == ["13:28 GPU303"]


# ---- actions built per environment of a batch of simulators --------------------------------------------------------

VECTOR_ENVS = textwrap.dedent("""\
    import numpy as np
    import torch

    device = torch.device("cuda")
    policy = torch.nn.Linear(64, 6).to(device)
    envs = [make_env(i) for i in range(8)]
    obs = np.stack([e.reset() for e in envs])
    while True:
        logits = policy(torch.as_tensor(obs, device=device))
        out = {"move": logits[:, :4].argmax(-1), "jump": logits[:, 4:].argmax(-1)}
        action = [{k: np.array(out[k][i].detach().cpu()) for k in out} for i in range(len(envs))]
        results = [{stepped} for e, a in zip(envs, action)]
        obs = np.stack([r[0] for r in results])
""")


def test_actions_built_per_environment_and_zipped_into_each_step_are_needed_on_the_host():
    # each simulator of the batch steps with its own action: the host needs the values, no rewrite avoids the wait
    assert findings(VECTOR_ENVS.replace("{stepped}", "e.step(a)"), select=("GPU303",)) == []


def test_actions_built_per_environment_but_only_logged_stay_reported():
    # the same reads, each element only recorded: nothing on the host needs them to go on
    assert findings(VECTOR_ENVS.replace("{stepped}", "log.record(a)"), select=("GPU303",)) == ["11:28 GPU303"]
    # stepping every simulator with another value (`e.step(0)`) does not need the read, but eight environment steps an
    # iteration bound the loop (`analysis/environment_loops.py`, cost_facts.md section 9): the wait is a small share
    assert findings(VECTOR_ENVS.replace("{stepped}", "e.step(0)"), select=("GPU303",)) == []


ENUMERATED_ENVS = textwrap.dedent("""\
    import numpy as np
    import torch

    device = torch.device("cuda")
    net = torch.nn.Linear(64, 6).to(device)
    envs = [make_env(i) for i in range(16)]
    obs = [e.reset() for e in envs]
    while True:
        probs = torch.softmax(net(torch.as_tensor(np.stack(obs), device=device)), dim=1).cpu().numpy()
        actions = select(probs)
        for e_idx, e in enumerate(envs):
            o, r, done, _ = {stepped}
            obs[e_idx] = o
""")


def test_actions_sampled_on_the_host_for_each_enumerated_environment_are_needed():
    # `for i, e in enumerate(envs)`: each simulator steps with its own sampled action, as with `zip(envs, actions)`
    assert findings(ENUMERATED_ENVS.replace("{stepped}", "e.step(actions[e_idx])"), select=("GPU303",)) == []


def test_enumerated_environments_stepped_with_another_value_are_environment_bound():
    # the read is not needed to step (`e.step(0)`), but sixteen environment steps an iteration bound the loop
    assert findings(ENUMERATED_ENVS.replace("{stepped}", "e.step(0)"), select=("GPU303",)) == []
    # without stepping them it stays reported
    assert findings(ENUMERATED_ENVS.replace("{stepped}", "log(e_idx)"), select=("GPU303",)) == ["9:13 GPU303"]
