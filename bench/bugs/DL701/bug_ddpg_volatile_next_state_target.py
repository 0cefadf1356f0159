# source: https://github.com/ghliu/pytorch-ddpg/pull/4
# category: DL701
# expect: flag 17, 84, 85, 86, 88
# evidence: volatile=True no longer does anything, so target_q_batch carries a graph through critic_target and actor_target and value_loss.backward() fills both target networks' .grad
import warnings

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.optim import Adam

FLOAT = torch.FloatTensor


def to_tensor(ndarray, volatile=False, requires_grad=False, dtype=FLOAT):
    return Variable(torch.from_numpy(ndarray), volatile=volatile, requires_grad=requires_grad).type(dtype)


def soft_update(target, source, tau):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)


def hard_update(target, source):
    for target_param, param in zip(target.parameters(), source.parameters()):
        target_param.data.copy_(param.data)


class Actor(nn.Module):
    def __init__(self, nb_states, nb_actions, hidden1=32, hidden2=16):
        super(Actor, self).__init__()
        self.fc1 = nn.Linear(nb_states, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, nb_actions)

    def forward(self, x):
        return torch.tanh(self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x))))))


class Critic(nn.Module):
    def __init__(self, nb_states, nb_actions, hidden1=32, hidden2=16):
        super(Critic, self).__init__()
        self.fc1 = nn.Linear(nb_states, hidden1)
        self.fc2 = nn.Linear(hidden1 + nb_actions, hidden2)
        self.fc3 = nn.Linear(hidden2, 1)

    def forward(self, xs):
        x, a = xs
        out = torch.relu(self.fc1(x))
        out = torch.relu(self.fc2(torch.cat([out, a], 1)))
        return self.fc3(out)


criterion = nn.MSELoss()


class DDPG(object):
    def __init__(self, nb_states, nb_actions, rate=1e-3, prate=1e-4, bsize=16, tau=0.001, discount=0.99):
        self.nb_states = nb_states
        self.nb_actions = nb_actions
        self.actor = Actor(nb_states, nb_actions)
        self.actor_target = Actor(nb_states, nb_actions)
        self.actor_optim = Adam(self.actor.parameters(), lr=prate)
        self.critic = Critic(nb_states, nb_actions)
        self.critic_target = Critic(nb_states, nb_actions)
        self.critic_optim = Adam(self.critic.parameters(), lr=rate)
        hard_update(self.actor_target, self.actor)
        hard_update(self.critic_target, self.critic)
        self.batch_size = bsize
        self.tau = tau
        self.discount = discount

    def sample_and_split(self, memory):
        idx = np.random.randint(0, len(memory[0]), self.batch_size)
        return tuple(m[idx] for m in memory)

    def update_policy(self, memory):
        # Sample batch
        state_batch, action_batch, reward_batch, \
            next_state_batch, terminal_batch = self.sample_and_split(memory)

        # Prepare for the target q batch
        next_q_values = self.critic_target([
            to_tensor(next_state_batch, volatile=True),
            self.actor_target(to_tensor(next_state_batch, volatile=True)),
        ])
        next_q_values.volatile = False

        target_q_batch = to_tensor(reward_batch) + \
            self.discount * to_tensor(terminal_batch.astype(np.float32)) * next_q_values

        # Critic update
        self.critic.zero_grad()
        q_batch = self.critic([to_tensor(state_batch), to_tensor(action_batch)])
        value_loss = criterion(q_batch, target_q_batch)
        value_loss.backward()
        self.critic_optim.step()

        # Actor update
        self.actor.zero_grad()
        policy_loss = -self.critic([to_tensor(state_batch), self.actor(to_tensor(state_batch))])
        policy_loss = policy_loss.mean()
        policy_loss.backward()
        self.actor_optim.step()

        # Target update
        soft_update(self.actor_target, self.actor, self.tau)
        soft_update(self.critic_target, self.critic, self.tau)


if __name__ == "__main__":
    np.random.seed(0)
    torch.manual_seed(0)
    n = 64
    memory = (np.random.randn(n, 3).astype(np.float32), np.random.uniform(-1, 1, (n, 2)).astype(np.float32),
              np.random.randn(n, 1).astype(np.float32), np.random.randn(n, 3).astype(np.float32),
              (np.random.rand(n, 1) > 0.1))
    agent = DDPG(nb_states=3, nb_actions=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent.update_policy(memory)

    assert any("volatile was removed" in str(w.message) for w in caught)
    assert agent.critic_target.fc1.weight.grad is not None  # value_loss reached the target critic
    assert agent.actor_target.fc1.weight.grad is not None  # ... and the target actor
    print("evidence holds: the 'volatile' target is a live graph; the TD loss back-propagates into both target nets")
