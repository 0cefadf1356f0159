# source: https://github.com/Kostis-S-Z/exploring_meta/issues/16
# category: DL505
# expect: flag 48, 49, 91
# evidence: the sampler stores log-probs and values as numpy, the A2C loss is rebuilt from them with torch.from_numpy, and loss.requires_grad = True lets backward run: after training every policy weight is unchanged
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self, obs_size, action_space, hidden=16):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(obs_size, hidden), nn.Tanh(), nn.Linear(hidden, action_space))
        self.critic = nn.Sequential(nn.Linear(obs_size, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, state):
        mass = Categorical(logits=self.actor(state))
        action = mass.sample()
        return action, {"mass": mass, "log_prob": mass.log_prob(action), "value": self.critic(state).squeeze(-1)}


class ToyEnv:
    def __init__(self, obs_size=4, seed=0):
        self.rng = np.random.default_rng(seed)
        self.obs_size = obs_size

    def reset(self):
        return self.rng.standard_normal(self.obs_size).astype(np.float32)

    def step(self, action):
        reward = 1.0 if action == 0 else 0.0
        return self.rng.standard_normal(self.obs_size).astype(np.float32), reward, False


class Sampler:
    def __init__(self, env, model, num_steps):
        self.env, self.model, self.num_steps = env, model, num_steps

    def run(self):
        samples = {"states": [], "actions": [], "log_prob": [], "values": [], "rewards": [], "dones": []}
        obs = self.env.reset()
        for _ in range(self.num_steps):
            action, info = self.model(torch.from_numpy(obs))
            next_obs, reward, done = self.env.step(action.item())
            samples["states"].append(obs)
            samples["actions"].append(action.item())
            samples["log_prob"].append(info["log_prob"].cpu().detach().numpy())
            samples["values"].append(info["value"].cpu().detach().numpy())
            samples["rewards"].append(reward)
            samples["dones"].append(float(done))
            obs = next_obs
        return {k: np.asarray(v, dtype=np.float32) for k, v in samples.items()}


def compute_adv_ret(samples, gamma, device='cpu'):
    values = torch.from_numpy(samples["values"]).to(device)
    rewards = torch.from_numpy(samples["rewards"]).to(device)
    with torch.no_grad():
        returns = torch.zeros_like(rewards)
        running = 0.0
        for t in reversed(range(len(rewards))):
            running = rewards[t] + gamma * running
            returns[t] = running
        advantages = returns - values
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    return advantages, returns


def compute_a2c_loss(episode_samples, device='cpu'):
    log_prob = torch.from_numpy(episode_samples["log_prob"]).to(device)
    advantages = torch.from_numpy(episode_samples["advantages"]).to(device)
    values = torch.from_numpy(episode_samples["values"]).to(device)
    returns = torch.from_numpy(episode_samples["returns"]).to(device)
    policy_loss = -(log_prob * advantages).mean()
    value_loss = 0.5 * (returns - values).pow(2).mean()
    return policy_loss, value_loss


def train(policy, env, n_iters=3, n_steps=8, gamma=0.99, lr=0.01, value_l_weight=0.5):
    policy_optimiser = torch.optim.Adam(policy.parameters(), lr=lr)
    for iteration in range(n_iters):
        sampler = Sampler(env=env, model=policy, num_steps=n_steps)
        tr_ep_samples = sampler.run()
        advantages, returns = compute_adv_ret(tr_ep_samples, gamma)
        tr_ep_samples["advantages"] = advantages.cpu().detach().numpy()
        tr_ep_samples["returns"] = returns.cpu().detach().numpy()
        policy_loss, value_loss = compute_a2c_loss(tr_ep_samples)
        loss = policy_loss + (value_l_weight * value_loss)
        policy_optimiser.zero_grad()
        loss.requires_grad = True
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
        policy_optimiser.step()
    return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    policy = ActorCritic(obs_size=4, action_space=3)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    loss = train(policy, ToyEnv())
    assert loss.grad_fn is None
    assert all(p.grad is None for p in policy.parameters())
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())
    print("evidence holds: the loss is rebuilt from numpy copies; the forced flag lets backward run and nothing trains")
