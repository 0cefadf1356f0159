# source: https://github.com/PaddlePaddle/PARL/issues/866
# category: DL603
# expect: clean
# evidence: DDPG._critic_learn computes target_Q from the target model and detaches the whole bootstrapped term, so critic_loss.backward() leaves every target-model parameter without a gradient; the target only moves through sync_target.
from copy import deepcopy
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, obs_dim=4, act_dim=2):
        super().__init__()
        self.actor_model = nn.Sequential(nn.Linear(obs_dim, 16), nn.ReLU(), nn.Linear(16, act_dim), nn.Tanh())
        self.critic_model = nn.Sequential(nn.Linear(obs_dim + act_dim, 16), nn.ReLU(), nn.Linear(16, 1))

    def policy(self, obs):
        return self.actor_model(obs)

    def value(self, obs, action):
        return self.critic_model(torch.cat([obs, action], dim=1))

    def get_actor_params(self):
        return self.actor_model.parameters()

    def get_critic_params(self):
        return self.critic_model.parameters()

    def sync_weights_to(self, target_model, decay=0.0):
        with torch.no_grad():
            for p, tp in zip(self.parameters(), target_model.parameters()):
                tp.copy_(decay * tp + (1 - decay) * p)


class DDPG:
    def __init__(self, model, gamma=None, tau=None, actor_lr=None, critic_lr=None):
        self.gamma, self.tau = gamma, tau
        self.model = model
        self.target_model = deepcopy(self.model)
        self.actor_optimizer = torch.optim.Adam(self.model.get_actor_params(), lr=actor_lr)
        self.critic_optimizer = torch.optim.Adam(self.model.get_critic_params(), lr=critic_lr)

    def learn(self, obs, action, reward, next_obs, terminal):
        critic_loss = self._critic_learn(obs, action, reward, next_obs, terminal)
        actor_loss = self._actor_learn(obs)
        self.sync_target()
        return critic_loss, actor_loss

    def _critic_learn(self, obs, action, reward, next_obs, terminal):
        # Compute the target Q value
        target_Q = self.target_model.value(next_obs, self.target_model.policy(next_obs))
        target_Q = reward + ((1. - terminal) * self.gamma * target_Q).detach()
        # Get current Q estimate
        current_Q = self.model.value(obs, action)
        # Compute critic loss
        critic_loss = F.mse_loss(current_Q, target_Q)
        # Optimize the critic
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        return critic_loss

    def _actor_learn(self, obs):
        action = self.model.policy(obs)
        Q = self.model.value(obs, action)
        actor_loss = -Q.mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        return actor_loss

    def sync_target(self, decay=None):
        if decay is None:
            decay = 1.0 - self.tau
        self.model.sync_weights_to(self.target_model, decay=decay)


if __name__ == "__main__":
    torch.manual_seed(0)
    alg = DDPG(Model(), gamma=0.99, tau=0.005, actor_lr=1e-3, critic_lr=1e-3)
    obs, action = torch.randn(8, 4), torch.rand(8, 2) * 2 - 1
    reward, next_obs, terminal = torch.randn(8, 1), torch.randn(8, 4), torch.zeros(8, 1)
    for _ in range(3):
        alg.learn(obs, action, reward, next_obs, terminal)

    assert all(p.grad is None for p in alg.target_model.parameters()), "no gradient leaked into the target model"
    assert all(p.grad is not None for p in alg.model.get_critic_params())
    print("evidence holds: after 3 DDPG updates the target model holds no gradients; critic params do")
