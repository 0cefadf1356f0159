# source: https://github.com/sfujim/TD3/blob/master/TD3.py
# category: DL603
# expect: clean
# evidence: target_Q is computed under torch.no_grad(), so actor_target and critic_target never receive gradients; critic and actor train and the targets move only by Polyak averaging
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Actor(nn.Module):
    def __init__(self, state_dim, action_dim, max_action):
        super(Actor, self).__init__()
        self.l1 = nn.Linear(state_dim, 32)
        self.l2 = nn.Linear(32, action_dim)
        self.max_action = max_action

    def forward(self, state):
        return self.max_action * torch.tanh(self.l2(F.relu(self.l1(state))))


class Critic(nn.Module):
    def __init__(self, state_dim, action_dim):
        super(Critic, self).__init__()
        self.l1 = nn.Linear(state_dim + action_dim, 32)
        self.l2 = nn.Linear(32, 1)
        self.l4 = nn.Linear(state_dim + action_dim, 32)
        self.l5 = nn.Linear(32, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        q1 = self.l2(F.relu(self.l1(sa)))
        q2 = self.l5(F.relu(self.l4(sa)))
        return q1, q2

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l2(F.relu(self.l1(sa)))


class TD3(object):
    def __init__(self, state_dim, action_dim, max_action, discount=0.99, tau=0.005,
                 policy_noise=0.2, noise_clip=0.5, policy_freq=2):
        self.actor = Actor(state_dim, action_dim, max_action)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic = Critic(state_dim, action_dim)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
        self.max_action = max_action
        self.discount = discount
        self.tau = tau
        self.policy_noise = policy_noise
        self.noise_clip = noise_clip
        self.policy_freq = policy_freq
        self.total_it = 0

    def train(self, replay_buffer, batch_size=256):
        self.total_it += 1
        state, action, next_state, reward, not_done = replay_buffer.sample(batch_size)

        with torch.no_grad():
            # target policy smoothing
            noise = (torch.randn_like(action) * self.policy_noise).clamp(-self.noise_clip, self.noise_clip)
            next_action = (self.actor_target(next_state) + noise).clamp(-self.max_action, self.max_action)
            # clipped double-Q target
            target_Q1, target_Q2 = self.critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * self.discount * target_Q

        current_Q1, current_Q2 = self.critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # delayed policy updates
        if self.total_it % self.policy_freq == 0:
            actor_loss = -self.critic.Q1(state, self.actor(state)).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()

            for param, target_param in zip(self.critic.parameters(), self.critic_target.parameters()):
                target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)
            for param, target_param in zip(self.actor.parameters(), self.actor_target.parameters()):
                target_param.data.copy_(self.tau * param.data + (1 - self.tau) * target_param.data)


class ReplayBuffer(object):
    def __init__(self, state_dim, action_dim, n=64):
        self.state = np.random.randn(n, state_dim)
        self.action = np.random.uniform(-1, 1, (n, action_dim))
        self.next_state = np.random.randn(n, state_dim)
        self.reward = np.random.randn(n, 1)
        self.not_done = 1. - (np.random.rand(n, 1) < 0.1)

    def sample(self, batch_size):
        ind = np.random.randint(0, len(self.state), size=batch_size)
        return (torch.FloatTensor(self.state[ind]), torch.FloatTensor(self.action[ind]),
                torch.FloatTensor(self.next_state[ind]), torch.FloatTensor(self.reward[ind]),
                torch.FloatTensor(self.not_done[ind]))


if __name__ == "__main__":
    np.random.seed(0)
    torch.manual_seed(0)
    policy = TD3(state_dim=3, action_dim=2, max_action=1.0)
    buffer = ReplayBuffer(3, 2)
    t0 = policy.critic_target.l1.weight.detach().clone()
    c0 = policy.critic.l1.weight.detach().clone()
    a0 = policy.actor.l1.weight.detach().clone()
    for _ in range(4):
        policy.train(buffer, batch_size=16)

    for net in (policy.actor_target, policy.critic_target):
        assert all(p.grad is None for p in net.parameters())
    assert not torch.equal(c0, policy.critic.l1.weight) and not torch.equal(a0, policy.actor.l1.weight)
    assert not torch.equal(t0, policy.critic_target.l1.weight)  # moved by the soft update only
    print("evidence holds: the TD target is built under no_grad; target networks never get a gradient")
