# source: https://github.com/QasimWani/RL-Unity/blob/master/DQN/code/agent.py
# category: DL603
# expect: clean
# evidence: Agent.train builds the TD target from qnetwork_target(next_states).detach(), so the loss sends no gradient into the target network, which only moves through soft_update.
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

BUFFER_SIZE = int(1e5)  # replay buffer size
BATCH_SIZE = 8          # minibatch size
TAU = 1e-3              # for soft update of target parameters


class DQNetwork(nn.Module):
    def __init__(self, state_size=37, action_size=4, fc1_units=32, fc2_units=32):
        super(DQNetwork, self).__init__()
        self.fc1 = nn.Linear(state_size, fc1_units)
        self.fc2 = nn.Linear(fc1_units, fc2_units)
        self.fc3 = nn.Linear(fc2_units, action_size)

    def forward(self, state):
        x = F.relu(self.fc1(state))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class ReplayBuffer:
    def __init__(self, buffer_size, batch_size):
        self.memory = []
        self.buffer_size = buffer_size
        self.batch_size = batch_size

    def add(self, transition):
        self.memory.append(transition)
        self.memory = self.memory[-self.buffer_size:]

    def isSampling(self):
        return len(self.memory) >= self.batch_size

    def sample(self):
        experiences = random.sample(self.memory, k=self.batch_size)
        states = torch.from_numpy(np.vstack([e[0] for e in experiences])).float()
        actions = torch.from_numpy(np.vstack([e[1] for e in experiences])).long()
        rewards = torch.from_numpy(np.vstack([e[2] for e in experiences])).float()
        next_states = torch.from_numpy(np.vstack([e[3] for e in experiences])).float()
        dones = torch.from_numpy(np.vstack([e[4] for e in experiences]).astype(np.uint8)).float()
        return (states, actions, rewards, next_states, dones)


class Agent():
    """Defines the agent class for DQN using Double Q-learning and Prioritized Experience Replay architecture"""
    def __init__(self, state_size=37, action_size=4, gamma=0.99, lr=0.001, update_every=5):
        self.state_size = state_size
        self.action_size = action_size

        self.gamma = gamma #define dicsounted return

        #Q-network : defines the 2 DQN (using doubling Q-learning architecture via fixed Q target)
        self.qnetwork_local = DQNetwork()
        self.qnetwork_target = DQNetwork()

        #define the optimizer
        self.optimizer = optim.Adam(self.qnetwork_local.parameters(), lr=lr)

        #replay memory
        self.memory = ReplayBuffer(BUFFER_SIZE, BATCH_SIZE)
        self.update_every = update_every
        self.target_update_counter = 0

    def step(self, transition):
        # Save experience in replay memory
        self.memory.add(transition)
        self.target_update_counter = (self.target_update_counter + 1) % self.update_every #cyclic update

        #Update target network to local network
        if(self.target_update_counter == 0 and self.memory.isSampling() == True):
            experiences = self.memory.sample()
            self.train(experiences)

    def train(self, experiences):
        states, actions, rewards, next_states, done = experiences

        #Implement SGD using Adam as regularizer
        Q_targets_next = self.qnetwork_target(next_states).detach().max(1)[0].unsqueeze(1)
        Q_targets = rewards + (self.gamma * Q_targets_next * (1 - done))
        Q_expected = self.qnetwork_local(states).gather(1, actions)
        #set loss as mse.
        loss = F.mse_loss(Q_expected, Q_targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

        #Update target network using soft update
        self.soft_update(self.qnetwork_local, self.qnetwork_target)

    def soft_update(self, local_model, target_model):
        for target_param, local_param in zip(target_model.parameters(), local_model.parameters()):
            target_param.data.copy_(TAU*local_param.data + (1.0-TAU)*target_param.data)


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    agent = Agent()
    local_before = agent.qnetwork_local.fc3.weight.detach().clone()

    for t in range(40):
        state = np.random.randn(37)
        transition = (state, random.randrange(4), random.random(), np.random.randn(37), False)
        agent.step(transition)

    assert all(p.grad is None for p in agent.qnetwork_target.parameters())
    assert all(p.grad is not None for p in agent.qnetwork_local.parameters())
    assert not torch.equal(local_before, agent.qnetwork_local.fc3.weight.detach())
    print("evidence holds: after several train() calls the target network never received a gradient; the local network trained")
