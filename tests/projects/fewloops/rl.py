"""RL training loops: per step the action goes back to the environment on the host; the loss and a value
estimate are only printed."""
import gym
import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn


class Agent:
    def __init__(self, env_name):
        self.env = gym.make(env_name)
        self.state = self.env.reset()

    def get_action(self, net, epsilon, device):
        if np.random.random() < epsilon:
            return self.env.action_space.sample()
        state = torch.tensor([self.state]).to(device)
        _, action = torch.max(net(state), dim=1)
        action = int(action.item())
        return action

    def play_step(self, net, epsilon, device):
        action = self.get_action(net, epsilon, device)
        new_state, reward, done, _ = self.env.step(action)
        self.state = self.env.reset() if done else new_state
        return reward, done

    def best_value(self, net, device):
        state = torch.tensor([self.state]).to(device)
        value = net(state).max().item()
        return value


device = torch.device("cuda")
policy = nn.Linear(4, 2).to(device)
opt = torch.optim.Adam(policy.parameters())
env = gym.make("CartPole-v1")
agent = Agent("CartPole-v1")
state = env.reset()
for step in range(100000):
    logits = policy(torch.as_tensor(state, device=device))
    action = logits.argmax().item()
    state, reward, done, _ = env.step(action)
    loss = -logits.log_softmax(-1)[action] * reward
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
    if done:
        state = env.reset()



class DQN(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.agent = Agent("CartPole-v1")

    def training_step(self, batch, nb_batch):
        reward, done = self.agent.play_step(self.net, 0.1, self.device)
        value = self.agent.best_value(self.net, self.device)
        print(value)
        return self.net(batch).sum() * reward

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters())


pl.Trainer(accelerator="gpu", max_steps=100000).fit(DQN(), torch.utils.data.DataLoader(torch.randn(64, 4), batch_size=8))
