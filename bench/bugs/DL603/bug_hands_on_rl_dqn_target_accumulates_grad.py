# source: https://github.com/boyu-ai/Hands-on-RL/issues/112
# category: DL603
# expect: flag 60, 61, 62
# evidence: every update() back-propagates the TD loss into target_q_net, whose .grad (never zeroed, no optimizer) grows as the sum of all updates' gradients
import collections
import random

import numpy as np
import torch
import torch.nn.functional as F


class ReplayBuffer:
    def __init__(self, capacity):
        self.buffer = collections.deque(maxlen=capacity)

    def add(self, state, action, reward, next_state, done):
        self.buffer.append((state, action, reward, next_state, done))

    def sample(self, batch_size):
        transitions = random.sample(self.buffer, batch_size)
        state, action, reward, next_state, done = zip(*transitions)
        return np.array(state), action, reward, np.array(next_state), done

    def size(self):
        return len(self.buffer)


class Qnet(torch.nn.Module):
    def __init__(self, state_dim, hidden_dim, action_dim):
        super(Qnet, self).__init__()
        self.fc1 = torch.nn.Linear(state_dim, hidden_dim)
        self.fc2 = torch.nn.Linear(hidden_dim, action_dim)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return self.fc2(x)


class DQN:
    def __init__(self, state_dim, hidden_dim, action_dim, learning_rate, gamma, epsilon, target_update):
        self.action_dim = action_dim
        self.q_net = Qnet(state_dim, hidden_dim, self.action_dim)
        self.target_q_net = Qnet(state_dim, hidden_dim, self.action_dim)
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=learning_rate)
        self.gamma = gamma
        self.epsilon = epsilon
        self.target_update = target_update
        self.count = 0

    def update(self, transition_dict):
        states = torch.tensor(transition_dict['states'], dtype=torch.float)
        actions = torch.tensor(transition_dict['actions']).view(-1, 1)
        rewards = torch.tensor(transition_dict['rewards'], dtype=torch.float).view(-1, 1)
        next_states = torch.tensor(transition_dict['next_states'], dtype=torch.float)
        dones = torch.tensor(transition_dict['dones'], dtype=torch.float).view(-1, 1)

        q_values = self.q_net(states).gather(1, actions)
        # max Q of the next state, from the target network
        max_next_q_values = self.target_q_net(next_states).max(1)[0].view(-1, 1)
        q_targets = rewards + self.gamma * max_next_q_values * (1 - dones)
        dqn_loss = torch.mean(F.mse_loss(q_values, q_targets))
        self.optimizer.zero_grad()
        dqn_loss.backward()
        self.optimizer.step()

        if self.count % self.target_update == 0:
            self.target_q_net.load_state_dict(self.q_net.state_dict())
        self.count += 1


if __name__ == "__main__":
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    agent = DQN(state_dim=4, hidden_dim=16, action_dim=2, learning_rate=2e-3, gamma=0.98, epsilon=0.01, target_update=10)
    replay_buffer = ReplayBuffer(100)
    for _ in range(40):
        replay_buffer.add(np.random.randn(4), np.random.randint(2), 1.0, np.random.randn(4), np.random.rand() < 0.1)

    w = agent.target_q_net.fc2.weight
    fresh = []
    w.register_hook(lambda g: fresh.append(g.detach().clone()))
    for _ in range(4):
        b_s, b_a, b_r, b_ns, b_d = replay_buffer.sample(16)
        agent.update({'states': b_s, 'actions': b_a, 'next_states': b_ns, 'rewards': b_r, 'dones': b_d})

    assert len(fresh) == 4  # the target network received a gradient on every update
    assert torch.allclose(w.grad, torch.stack(fresh).sum(0), atol=1e-6)  # and keeps all of them
    assert w.grad.abs().sum() > 0
    print("evidence holds: the TD target is built through target_q_net with gradient tracking on")
