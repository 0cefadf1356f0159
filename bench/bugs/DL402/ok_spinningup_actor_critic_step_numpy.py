# source: https://github.com/openai/spinningup/blob/master/spinup/algos/pytorch/ppo/core.py
# category: DL402
# expect: clean
# evidence: MLPActorCritic.step samples under torch.no_grad(), so a.numpy(), v.numpy() and logp_a.numpy() work; the PPO update recomputes log-probs and values with grad and trains both networks
import numpy as np
import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical


def mlp(sizes, activation, output_activation=nn.Identity):
    layers = []
    for j in range(len(sizes) - 1):
        act = activation if j < len(sizes) - 2 else output_activation
        layers += [nn.Linear(sizes[j], sizes[j + 1]), act()]
    return nn.Sequential(*layers)


class Actor(nn.Module):
    def forward(self, obs, act=None):
        pi = self._distribution(obs)
        logp_a = None
        if act is not None:
            logp_a = self._log_prob_from_distribution(pi, act)
        return pi, logp_a


class MLPCategoricalActor(Actor):
    def __init__(self, obs_dim, act_dim, hidden_sizes, activation):
        super().__init__()
        self.logits_net = mlp([obs_dim] + list(hidden_sizes) + [act_dim], activation)

    def _distribution(self, obs):
        return Categorical(logits=self.logits_net(obs))

    def _log_prob_from_distribution(self, pi, act):
        return pi.log_prob(act)


class MLPCritic(nn.Module):
    def __init__(self, obs_dim, hidden_sizes, activation):
        super().__init__()
        self.v_net = mlp([obs_dim] + list(hidden_sizes) + [1], activation)

    def forward(self, obs):
        return torch.squeeze(self.v_net(obs), -1)


class MLPActorCritic(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden_sizes=(64, 64), activation=nn.Tanh):
        super().__init__()
        self.pi = MLPCategoricalActor(obs_dim, act_dim, hidden_sizes, activation)
        self.v = MLPCritic(obs_dim, hidden_sizes, activation)

    def step(self, obs):
        with torch.no_grad():
            pi = self.pi._distribution(obs)
            a = pi.sample()
            logp_a = self.pi._log_prob_from_distribution(pi, a)
            v = self.v(obs)
        return a.numpy(), v.numpy(), logp_a.numpy()

    def act(self, obs):
        return self.step(obs)[0]


def ppo_update(ac, data, pi_optimizer, vf_optimizer, clip_ratio=0.2, train_iters=3):
    obs, act, adv, logp_old, ret = data['obs'], data['act'], data['adv'], data['logp'], data['ret']

    def compute_loss_pi():
        pi, logp = ac.pi(obs, act)
        ratio = torch.exp(logp - logp_old)
        clip_adv = torch.clamp(ratio, 1 - clip_ratio, 1 + clip_ratio) * adv
        return -(torch.min(ratio * adv, clip_adv)).mean()

    def compute_loss_v():
        return ((ac.v(obs) - ret) ** 2).mean()

    for i in range(train_iters):
        pi_optimizer.zero_grad()
        loss_pi = compute_loss_pi()
        loss_pi.backward()
        pi_optimizer.step()
    for i in range(train_iters):
        vf_optimizer.zero_grad()
        loss_v = compute_loss_v()
        loss_v.backward()
        vf_optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    ac = MLPActorCritic(obs_dim=4, act_dim=2)
    pi_optimizer = torch.optim.Adam(ac.pi.parameters(), lr=3e-3)
    vf_optimizer = torch.optim.Adam(ac.v.parameters(), lr=1e-2)

    obs_buf, act_buf, logp_buf, val_buf, rew_buf = [], [], [], [], []
    o = rng.randn(4)
    for t in range(16):
        a, v, logp = ac.step(torch.as_tensor(o, dtype=torch.float32))
        assert isinstance(a, np.ndarray) and isinstance(logp, np.ndarray)
        obs_buf.append(o); act_buf.append(a); logp_buf.append(logp); val_buf.append(v)
        rew_buf.append(1.0 if a == 0 else 0.0)
        o = rng.randn(4)

    ret = np.cumsum(rew_buf[::-1])[::-1].astype(np.float32)
    adv = ret - np.array(val_buf, dtype=np.float32)
    data = {k: torch.as_tensor(np.array(v), dtype=torch.float32) for k, v in
            dict(obs=obs_buf, adv=(adv - adv.mean()) / (adv.std() + 1e-8), logp=logp_buf, ret=ret).items()}
    data['act'] = torch.as_tensor(np.array(act_buf))

    pi0 = ac.pi.logits_net[0].weight.detach().clone()
    v0 = ac.v.v_net[0].weight.detach().clone()
    ppo_update(ac, data, pi_optimizer, vf_optimizer)
    assert not torch.equal(pi0, ac.pi.logits_net[0].weight.detach())
    assert not torch.equal(v0, ac.v.v_net[0].weight.detach())
    print("evidence holds: .numpy() on the no_grad rollout outputs works and the update still trains pi and v")
