# source: https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/dqn.py
# category: DL603
# expect: clean
# evidence: the TD target is computed from target_network inside torch.no_grad(), so td_target has no grad_fn, loss.backward() leaves target_network without gradients, and q_network is still trained.
import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


@dataclass
class Args:
    seed: int = 1
    learning_rate: float = 2.5e-4
    buffer_size: int = 64
    gamma: float = 0.99
    tau: float = 1.0
    target_network_frequency: int = 20
    batch_size: int = 16
    start_e: float = 1
    end_e: float = 0.05
    exploration_fraction: float = 0.5
    learning_starts: int = 20
    train_frequency: int = 2
    total_timesteps: int = 80


@dataclass
class ReplayBufferSamples:
    observations: torch.Tensor
    actions: torch.Tensor
    next_observations: torch.Tensor
    dones: torch.Tensor
    rewards: torch.Tensor


class ReplayBuffer:
    """Minimal stand-in for stable_baselines3's ReplayBuffer."""

    def __init__(self, buffer_size, obs_dim):
        self.obs = np.zeros((buffer_size, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros((buffer_size, 1), dtype=np.int64)
        self.rewards = np.zeros((buffer_size, 1), dtype=np.float32)
        self.dones = np.zeros((buffer_size, 1), dtype=np.float32)
        self.pos, self.full, self.size = 0, False, buffer_size

    def add(self, obs, next_obs, action, reward, done):
        self.obs[self.pos], self.next_obs[self.pos] = obs, next_obs
        self.actions[self.pos], self.rewards[self.pos], self.dones[self.pos] = action, reward, done
        self.pos = (self.pos + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, batch_size):
        idx = np.random.randint(0, self.size if self.full else self.pos, size=batch_size)
        t = lambda a: torch.as_tensor(a[idx])
        return ReplayBufferSamples(t(self.obs), t(self.actions), t(self.next_obs), t(self.dones), t(self.rewards))


# ALGO LOGIC: initialize agent here:
class QNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(obs_dim, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, n_actions),
        )

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


if __name__ == "__main__":
    args = Args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cpu")
    obs_dim, n_actions = 4, 2

    q_network = QNetwork(obs_dim, n_actions).to(device)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(obs_dim, n_actions).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(args.buffer_size, obs_dim)
    w_before = q_network.network[0].weight.detach().clone()
    td_targets_have_graph = []

    obs = np.random.randn(obs_dim).astype(np.float32)
    for global_step in range(args.total_timesteps):
        # ALGO LOGIC: put action logic here
        epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
        if random.random() < epsilon:
            actions = np.array(random.randrange(n_actions))
        else:
            q_values = q_network(torch.Tensor(obs).to(device))
            actions = torch.argmax(q_values).cpu().numpy()

        # a toy environment step instead of envs.step(actions)
        next_obs = np.random.randn(obs_dim).astype(np.float32)
        rewards, dones = float(actions == (obs[0] > 0)), float(random.random() < 0.05)
        rb.add(obs, next_obs, actions, rewards, dones)
        obs = next_obs

        # ALGO LOGIC: training.
        if global_step > args.learning_starts:
            if global_step % args.train_frequency == 0:
                data = rb.sample(args.batch_size)
                with torch.no_grad():
                    target_max, _ = target_network(data.next_observations).max(dim=1)
                    td_target = data.rewards.flatten() + args.gamma * target_max * (1 - data.dones.flatten())
                old_val = q_network(data.observations).gather(1, data.actions).squeeze()
                loss = F.mse_loss(td_target, old_val)
                td_targets_have_graph.append(td_target.grad_fn is not None)

                # optimize the model
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

            # update target network
            if global_step % args.target_network_frequency == 0:
                for target_network_param, q_network_param in zip(target_network.parameters(), q_network.parameters()):
                    target_network_param.data.copy_(
                        args.tau * q_network_param.data + (1.0 - args.tau) * target_network_param.data
                    )

    assert td_targets_have_graph and not any(td_targets_have_graph)
    assert all(p.grad is None for p in target_network.parameters())
    assert not torch.equal(w_before, q_network.network[0].weight.detach())
    print("evidence holds:", len(td_targets_have_graph), "TD targets built without graph; target_network has no grads")
