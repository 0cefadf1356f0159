# source: https://github.com/datawhalechina/easy-rl/pull/117
# category: DL603
# expect: flag 88, 90, 91
# evidence: the Double-DQN expected Q value is built through target_net with autograd on, so loss.backward() fills target_net's .grad on every update
import math
import random
from collections import deque
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class MLP(nn.Module):
    def __init__(self, n_states, n_actions, hidden_dim=32):
        super(MLP, self).__init__()
        self.fc1 = nn.Linear(n_states, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, hidden_dim)
        self.fc3 = nn.Linear(hidden_dim, n_actions)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class ReplayBuffer(object):
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.buffer = deque(maxlen=self.capacity)

    def push(self, transitions):
        self.buffer.append(transitions)

    def sample(self, batch_size: int):
        batch_size = min(batch_size, len(self.buffer))
        batch = random.sample(self.buffer, batch_size)
        return zip(*batch)

    def __len__(self):
        return len(self.buffer)


class DoubleDQN(object):
    def __init__(self, cfg):
        self.n_actions = cfg.n_actions
        self.gamma = cfg.gamma
        self.sample_count = 0
        self.epsilon = cfg.epsilon_start
        self.epsilon_start = cfg.epsilon_start
        self.epsilon_end = cfg.epsilon_end
        self.epsilon_decay = cfg.epsilon_decay
        self.batch_size = cfg.batch_size
        self.target_update = cfg.target_update
        self.policy_net = MLP(cfg.n_states, cfg.n_actions, hidden_dim=cfg.hidden_dim)
        self.target_net = MLP(cfg.n_states, cfg.n_actions, hidden_dim=cfg.hidden_dim)
        self.target_net.load_state_dict(self.policy_net.state_dict())
        self.optimizer = optim.Adam(self.policy_net.parameters(), lr=cfg.lr)
        self.memory = ReplayBuffer(cfg.buffer_size)

    def sample_action(self, state):
        self.sample_count += 1
        self.epsilon = self.epsilon_end + (self.epsilon_start - self.epsilon_end) * \
            math.exp(-1. * self.sample_count / self.epsilon_decay)
        if random.random() > self.epsilon:
            with torch.no_grad():
                state = torch.tensor(state, dtype=torch.float32).unsqueeze(dim=0)
                q_values = self.policy_net(state)
                action = q_values.max(1)[1].item()
        else:
            action = random.randrange(self.n_actions)
        return action

    def update(self):
        if len(self.memory) < self.batch_size:
            return
        state_batch, action_batch, reward_batch, next_state_batch, done_batch = self.memory.sample(self.batch_size)
        state_batch = torch.tensor(np.array(state_batch), dtype=torch.float)
        action_batch = torch.tensor(action_batch).unsqueeze(1)
        reward_batch = torch.tensor(reward_batch, dtype=torch.float).unsqueeze(1)
        next_state_batch = torch.tensor(np.array(next_state_batch), dtype=torch.float)
        done_batch = torch.tensor(np.float32(done_batch)).unsqueeze(1)
        q_value_batch = self.policy_net(state_batch).gather(dim=1, index=action_batch)
        next_q_value_batch = self.policy_net(next_state_batch)
        next_target_value_batch = self.target_net(next_state_batch)
        # Double DQN: the online net picks the action, the target net scores it
        next_target_q_value_batch = next_target_value_batch.gather(1, torch.max(next_q_value_batch, 1)[1].unsqueeze(1))
        expected_q_value_batch = reward_batch + self.gamma * next_target_q_value_batch * (1 - done_batch)
        loss = nn.MSELoss()(q_value_batch, expected_q_value_batch)
        self.optimizer.zero_grad()
        loss.backward()
        for param in self.policy_net.parameters():
            param.grad.clamp_(-1, 1)
        self.optimizer.step()
        if self.sample_count % self.target_update == 0:
            self.target_net.load_state_dict(self.policy_net.state_dict())


def train(cfg, transitions, agent):
    for (state, reward, next_state, done) in transitions:
        action = agent.sample_action(state)
        agent.memory.push((state, action, reward, next_state, done))
        agent.update()


if __name__ == "__main__":
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    cfg = SimpleNamespace(n_states=4, n_actions=2, gamma=0.99, lr=1e-3, epsilon_start=0.95, epsilon_end=0.01,
                          epsilon_decay=500, buffer_size=100, batch_size=8, target_update=4, hidden_dim=16)
    agent = DoubleDQN(cfg)
    transitions = [(np.random.randn(4), 1.0, np.random.randn(4), i % 7 == 6) for i in range(12)]

    hits = []
    agent.target_net.fc3.weight.register_hook(lambda g: hits.append(1))
    train(cfg, transitions, agent)

    n_updates = len(transitions) - cfg.batch_size + 1
    assert len(hits) == n_updates  # every update back-propagated into the target network
    assert agent.target_net.fc3.weight.grad is not None
    print("evidence holds: the TD target of Double DQN is not detached from target_net")
