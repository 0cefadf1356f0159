# source: https://github.com/pytorch/examples/blob/main/reinforcement_learning/actor_critic.py
# category: DL202
# expect: clean
# evidence: with the advantage taken as a number (value.item()), both the action head and the value head get gradients
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

SavedAction = namedtuple('SavedAction', ['log_prob', 'value'])
gamma = 0.99
eps = np.finfo(np.float32).eps.item()


class Policy(nn.Module):
    """Actor and critic in one model."""

    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 16)
        self.action_head = nn.Linear(16, 2)
        self.value_head = nn.Linear(16, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=3e-2)


def select_action(state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode():
    R = 0
    saved_actions = model.saved_actions
    policy_losses = []
    value_losses = []
    returns = []
    for r in model.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)

    for (log_prob, value), R in zip(saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))

    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]
    return grads


def run_episode(rng, steps=6):
    state = rng.standard_normal(4)
    for t in range(steps):
        action = select_action(state)
        state = rng.standard_normal(4)
        model.rewards.append(1.0 if action == 0 else 0.0)


if __name__ == "__main__":
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    run_episode(rng)
    grads = finish_episode()
    assert grads['action_head.weight'].abs().sum() > 0  # the policy term trains the actor
    assert grads['value_head.weight'].abs().sum() > 0  # the value term trains the critic
    print("evidence holds: the .item() advantage is a constant weight; actor and critic both get gradients")
