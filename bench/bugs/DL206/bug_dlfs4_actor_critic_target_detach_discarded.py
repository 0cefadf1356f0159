# source: https://github.com/oreilly-japan/deep-learning-from-scratch-4/blob/master/pytorch/actor_critic.py
# category: DL206
# expect: flag 65
# evidence: target.detach() cuts nothing: the value loss also backpropagates through v(next_state), so the critic's gradient differs from the TD(0) semi-gradient
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical


class PolicyNet(nn.Module):
    def __init__(self, action_size):
        super().__init__()
        self.l1 = nn.Linear(4, 128)
        self.l2 = nn.Linear(128, action_size)

    def forward(self, x):
        x = F.relu(self.l1(x))
        x = F.softmax(self.l2(x), dim=1)
        return x


class ValueNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 128)
        self.l2 = nn.Linear(128, 1)

    def forward(self, x):
        x = F.relu(self.l1(x))
        x = self.l2(x)
        return x


class Agent:
    def __init__(self):
        self.gamma = 0.98
        self.lr_pi = 0.0002
        self.lr_v = 0.0005
        self.action_size = 2

        self.pi = PolicyNet(self.action_size)
        self.v = ValueNet()

        self.optimizer_pi = optim.Adam(self.pi.parameters(), lr=self.lr_pi)
        self.optimizer_v = optim.Adam(self.v.parameters(), lr=self.lr_v)

    def get_action(self, state):
        state = torch.tensor(state[np.newaxis, :])
        probs = self.pi(state)
        probs = probs[0]
        m = Categorical(probs)
        action = m.sample().item()
        return action, probs[action]

    def update(self, state, action_prob, reward, next_state, done):
        state = torch.tensor(state[np.newaxis, :])
        next_state = torch.tensor(next_state[np.newaxis, :])

        target = reward + self.gamma * self.v(next_state) * (1 - done)
        target.detach()
        v = self.v(state)
        loss_fn = nn.MSELoss()
        loss_v = loss_fn(v, target)

        delta = target - v
        loss_pi = -torch.log(action_prob) * delta.item()

        self.optimizer_v.zero_grad()
        self.optimizer_pi.zero_grad()
        loss_v.backward()
        loss_pi.backward()
        self.optimizer_v.step()
        self.optimizer_pi.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = Agent()
    reference = copy.deepcopy(agent.v)
    for group in agent.optimizer_v.param_groups:
        group["lr"] = 0.0  # keep the critic's weights fixed so its gradient can be compared
    state = np.array([0.01, -0.02, 0.03, 0.01], dtype=np.float32)
    next_state = np.array([0.02, 0.01, 0.02, -0.01], dtype=np.float32)
    action, prob = agent.get_action(state)
    agent.update(state, prob, 1.0, next_state, False)
    bug_grads = [p.grad.clone() for p in agent.v.parameters()]

    # the TD(0) semi-gradient: the bootstrapped target is a constant
    with torch.no_grad():
        fixed_target = 1.0 + agent.gamma * reference(torch.tensor(next_state[np.newaxis, :]))
    ref_loss = F.mse_loss(reference(torch.tensor(state[np.newaxis, :])), fixed_target)
    ref_grads = torch.autograd.grad(ref_loss, list(reference.parameters()))
    assert not all(torch.allclose(b, r) for b, r in zip(bug_grads, ref_grads))
    print("evidence holds: the critic's gradient includes the path through v(next_state); it is not the semi-gradient")
