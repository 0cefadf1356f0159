# source: https://github.com/openai/spinningup/blob/master/spinup/algos/pytorch/ddpg/ddpg.py
# category: DL603
# expect: clean
# evidence: the Bellman backup from the target actor-critic is computed under torch.no_grad, so after update() the target parameters have no gradient and change only through the polyak copy, while the main Q and pi networks are trained.
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
from torch.optim import Adam


def mlp(sizes, activation, output_activation=nn.Identity):
    layers = []
    for j in range(len(sizes) - 1):
        act = activation if j < len(sizes) - 2 else output_activation
        layers += [nn.Linear(sizes[j], sizes[j + 1]), act()]
    return nn.Sequential(*layers)


class MLPActor(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden_sizes, activation, act_limit):
        super().__init__()
        pi_sizes = [obs_dim] + list(hidden_sizes) + [act_dim]
        self.pi = mlp(pi_sizes, activation, nn.Tanh)
        self.act_limit = act_limit

    def forward(self, obs):
        return self.act_limit * self.pi(obs)


class MLPQFunction(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden_sizes, activation):
        super().__init__()
        self.q = mlp([obs_dim + act_dim] + list(hidden_sizes) + [1], activation)

    def forward(self, obs, act):
        q = self.q(torch.cat([obs, act], dim=-1))
        return torch.squeeze(q, -1)


class MLPActorCritic(nn.Module):
    def __init__(self, obs_dim, act_dim, act_limit, hidden_sizes=(16, 16), activation=nn.ReLU):
        super().__init__()
        self.pi = MLPActor(obs_dim, act_dim, hidden_sizes, activation, act_limit)
        self.q = MLPQFunction(obs_dim, act_dim, hidden_sizes, activation)

    def act(self, obs):
        with torch.no_grad():
            return self.pi(obs).numpy()


def ddpg(obs_dim=3, act_dim=1, act_limit=1.0, gamma=0.99, polyak=0.995, pi_lr=1e-3, q_lr=1e-3,
         batch_size=8, n_updates=3, seed=0):
    torch.manual_seed(seed)
    np.random.seed(seed)

    # Create actor-critic module and target networks
    ac = MLPActorCritic(obs_dim, act_dim, act_limit)
    ac_targ = deepcopy(ac)

    # Freeze target networks with respect to optimizers (only update via polyak averaging)
    for p in ac_targ.parameters():
        p.requires_grad = False

    # Set up function for computing DDPG Q-loss
    def compute_loss_q(data):
        o, a, r, o2, d = data['obs'], data['act'], data['rew'], data['obs2'], data['done']

        q = ac.q(o, a)

        # Bellman backup for Q function
        with torch.no_grad():
            q_pi_targ = ac_targ.q(o2, ac_targ.pi(o2))
            backup = r + gamma * (1 - d) * q_pi_targ

        # MSE loss against Bellman backup
        loss_q = ((q - backup) ** 2).mean()
        loss_info = dict(QVals=q.detach().numpy())
        return loss_q, loss_info

    # Set up function for computing DDPG pi loss
    def compute_loss_pi(data):
        o = data['obs']
        q_pi = ac.q(o, ac.pi(o))
        return -q_pi.mean()

    pi_optimizer = Adam(ac.pi.parameters(), lr=pi_lr)
    q_optimizer = Adam(ac.q.parameters(), lr=q_lr)

    def update(data):
        # First run one gradient descent step for Q.
        q_optimizer.zero_grad()
        loss_q, loss_info = compute_loss_q(data)
        loss_q.backward()
        q_optimizer.step()

        # Freeze Q-network so you don't waste computational effort
        # computing gradients for it during the policy learning step.
        for p in ac.q.parameters():
            p.requires_grad = False

        # Next run one gradient descent step for pi.
        pi_optimizer.zero_grad()
        loss_pi = compute_loss_pi(data)
        loss_pi.backward()
        pi_optimizer.step()

        # Unfreeze Q-network so you can optimize it at next DDPG step.
        for p in ac.q.parameters():
            p.requires_grad = True

        # Finally, update target networks by polyak averaging.
        with torch.no_grad():
            for p, p_targ in zip(ac.parameters(), ac_targ.parameters()):
                p_targ.data.mul_(polyak)
                p_targ.data.add_((1 - polyak) * p.data)
        return loss_q.item(), loss_pi.item()

    def sample_batch():
        return dict(obs=torch.randn(batch_size, obs_dim), act=torch.rand(batch_size, act_dim) * 2 - 1,
                    rew=torch.randn(batch_size), obs2=torch.randn(batch_size, obs_dim),
                    done=torch.zeros(batch_size))

    main_before = [p.detach().clone() for p in ac.parameters()]
    targ_before = [p.detach().clone() for p in ac_targ.parameters()]
    for _ in range(n_updates):
        update(data=sample_batch())
    return ac, ac_targ, main_before, targ_before, polyak


if __name__ == "__main__":
    ac, ac_targ, main_before, targ_before, polyak = ddpg()
    for p in ac_targ.parameters():
        assert p.grad is None
        assert not p.requires_grad
    assert all(p.grad is not None for p in ac.q.parameters())
    assert all(p.grad is not None for p in ac.pi.parameters())
    assert any(not torch.equal(p.detach(), b) for p, b in zip(ac.q.parameters(), main_before[len(list(ac.pi.parameters())):]))
    # target moved only by the polyak copy: it stays close to the old target
    with torch.no_grad():
        drift = max((p - b).abs().max().item() for p, b in zip(ac_targ.parameters(), targ_before))
    assert 0 < drift < 0.05
    print("evidence holds: target nets get no gradient (backup under no_grad) and move only via polyak; Q and pi train")
