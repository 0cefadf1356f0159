# source: https://github.com/pytorch/examples/blob/main/reinforcement_learning/reinforce.py
# category: DL401
# expect: clean
# evidence: the episode's log-probabilities are collected in a list on purpose and backpropagated once in finish_episode, which then clears the lists; the graph does not outlive the episode and the policy weights change
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

gamma = 0.99
eps = np.finfo(np.float32).eps.item()


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]


class ToyCartPole:
    """A stand-in environment: 4-d state, reward 1 per step, episode ends after `horizon` steps."""

    def __init__(self, horizon=10, seed=0):
        self.horizon = horizon
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.t = 0
        return self.rng.randn(4)

    def step(self, action):
        self.t += 1
        return self.rng.randn(4), 1.0 if action == 0 else 0.5, self.t >= self.horizon, {}


def main(n_episodes=3):
    env = ToyCartPole()
    running_reward = 10
    for i_episode in range(n_episodes):
        state, ep_reward = env.reset(), 0
        for t in range(1, 10000):
            action = select_action(state)
            state, reward, done, _ = env.step(action)
            policy.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        finish_episode()
    return running_reward


if __name__ == "__main__":
    torch.manual_seed(0)
    w0 = policy.affine1.weight.detach().clone()
    running_reward = main(n_episodes=3)
    assert isinstance(running_reward, float)
    assert policy.saved_log_probs == [] and policy.rewards == []  # nothing survives the episode
    assert not torch.equal(w0, policy.affine1.weight.detach())
    print("evidence holds: the collected log-probs are backpropagated once per episode and then dropped")
