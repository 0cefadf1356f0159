# source: https://github.com/jsboige/CoursIA/pull/15256
# category: DL201
# expect: flag 58, 86
# evidence: rollout() stores value.item(), so v_loss in train_gae has no grad_fn and the critic head (Linear(64,1)) gets grad None and stays exactly at its initialisation while the actor trains.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ChainEnv:
    """Tiny chain MDP: move left/right, reward at the right end."""

    def __init__(self, n_states=6, max_steps=12, seed=0):
        self.n_states, self.max_steps = n_states, max_steps
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.pos, self.t = 0, 0
        return self._obs()

    def _obs(self):
        obs = np.zeros(self.n_states, dtype=np.float32)
        obs[self.pos] = 1.0
        return obs

    def step(self, action):
        self.pos = min(self.n_states - 1, self.pos + 1) if action == 1 else max(0, self.pos - 1)
        self.t += 1
        done = self.pos == self.n_states - 1 or self.t >= self.max_steps
        reward = 1.0 if self.pos == self.n_states - 1 else -0.01
        return self._obs(), reward, done


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh())
        self.actor = nn.Linear(hidden, n_actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.actor(h), self.critic(h).squeeze(-1)


def rollout(model, env):
    """Collect one episode; returns log-probs, values and rewards."""
    obs = env.reset()
    log_probs, values, rewards = [], [], []
    done = False
    while not done:
        logits, value = model(torch.as_tensor(obs))
        dist = torch.distributions.Categorical(logits=logits)
        action = dist.sample()
        obs, reward, done = env.step(action.item())
        log_probs.append(dist.log_prob(action))
        values.append(value.item())
        rewards.append(reward)
    return log_probs, values, rewards


def compute_gae(rewards, values, gamma=0.99, lam=0.95):
    advantages = np.zeros(len(rewards), dtype=np.float32)
    gae = 0.0
    for t in reversed(range(len(rewards))):
        next_value = values[t + 1] if t + 1 < len(values) else 0.0
        delta = rewards[t] + gamma * next_value - values[t]
        gae = delta + gamma * lam * gae
        advantages[t] = gae
    returns = advantages + np.asarray(values, dtype=np.float32)
    return advantages, returns


def train_gae(model, optimizer, env, n_epochs=4, episodes_per_epoch=3, value_coef=0.5):
    critic_w0 = model.critic.weight.detach().clone()
    history = []
    for epoch in range(n_epochs):
        optimizer.zero_grad()
        total = 0.0
        for _ in range(episodes_per_epoch):
            log_probs, values, rewards = rollout(model, env)
            advantages, returns = compute_gae(rewards, values)
            adv_t = torch.as_tensor(advantages)
            adv_t = (adv_t - adv_t.mean()) / (adv_t.std() + 1e-8) if len(adv_t) > 1 else adv_t
            values_t = torch.tensor(values, dtype=torch.float32)
            returns_t = torch.as_tensor(returns)
            pg_loss = -(torch.stack(log_probs) * adv_t).mean()
            v_loss = F.mse_loss(values_t, returns_t)
            loss = (pg_loss + value_coef * v_loss) / episodes_per_epoch
            loss.backward()
            total += loss.item()
        critic_grad = model.critic.weight.grad
        optimizer.step()
        delta = (model.critic.weight.detach() - critic_w0).abs().max().item()
        history.append((total, critic_grad, delta))
        print(f"epoch {epoch}: loss={total:.3f} critic_weight_delta={delta:.2e}")
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    env = ChainEnv()
    model = ActorCritic(obs_dim=6, n_actions=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    actor_before = model.actor.weight.detach().clone()
    history = train_gae(model, optimizer, env)
    with torch.no_grad():
        assert all(grad is None for _, grad, _ in history)
        assert all(delta == 0.0 for _, _, delta in history)
        assert not torch.equal(actor_before, model.actor.weight)
    print("evidence holds: the critic head never receives a gradient (value.item() in rollout) and stays frozen; the actor trains")
