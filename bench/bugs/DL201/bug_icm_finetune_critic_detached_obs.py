# source: https://github.com/rll-research/url_benchmark/issues/10
# category: DL201
# expect: flag 105
# evidence: in the fine-tuning phase update() steps encoder_opt, yet the encoder gets no gradient (grad None) and its weights stay identical while the critic's change
import torch
from torch import nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, obs_dim, repr_dim):
        super().__init__()
        self.convnet = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, repr_dim))

    def forward(self, obs):
        return self.convnet(obs)


class Critic(nn.Module):
    def __init__(self, repr_dim, action_dim, hidden_dim):
        super().__init__()
        self.q = nn.Sequential(nn.Linear(repr_dim + action_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 1))

    def forward(self, obs, action):
        return self.q(torch.cat([obs, action], dim=-1))


class ICM(nn.Module):
    def __init__(self, repr_dim, action_dim, hidden_dim):
        super().__init__()
        self.forward_net = nn.Sequential(nn.Linear(repr_dim + action_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, repr_dim))
        self.backward_net = nn.Sequential(nn.Linear(2 * repr_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, action_dim), nn.Tanh())

    def forward(self, obs, action, next_obs):
        next_obs_hat = self.forward_net(torch.cat([obs, action], dim=-1))
        action_hat = self.backward_net(torch.cat([obs, next_obs], dim=-1))
        forward_error = torch.norm(next_obs - next_obs_hat, dim=-1, p=2, keepdim=True)
        backward_error = torch.norm(action - action_hat, dim=-1, p=2, keepdim=True)
        return forward_error, backward_error


class DDPGAgent:
    def __init__(self, obs_dim, action_dim, hidden_dim=32, lr=1e-2, update_encoder=True):
        self.update_encoder = update_encoder
        self.encoder = Encoder(obs_dim, 16)
        self.critic = Critic(16, action_dim, hidden_dim)
        self.critic_target = Critic(16, action_dim, hidden_dim)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)

    def aug_and_encode(self, obs):
        return self.encoder(obs)

    def update_critic(self, obs, action, reward, discount, next_obs):
        with torch.no_grad():
            target_q = reward + discount * self.critic_target(next_obs, action)
        q = self.critic(obs, action)
        critic_loss = F.mse_loss(q, target_q)
        if self.encoder_opt is not None:
            self.encoder_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        if self.encoder_opt is not None:
            self.encoder_opt.step()
        return {"critic_loss": critic_loss.item()}


class ICMAgent(DDPGAgent):
    def __init__(self, obs_dim, action_dim, reward_free, **kwargs):
        super().__init__(obs_dim, action_dim, **kwargs)
        self.reward_free = reward_free
        self.icm = ICM(16, action_dim, 32)
        self.icm_opt = torch.optim.Adam(self.icm.parameters(), lr=1e-2)

    def update_icm(self, obs, action, next_obs):
        forward_error, backward_error = self.icm(obs, action, next_obs)
        loss = forward_error.mean() + backward_error.mean()
        self.icm_opt.zero_grad(set_to_none=True)
        self.encoder_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.icm_opt.step()
        self.encoder_opt.step()
        return {"icm_loss": loss.item()}

    def update(self, batch):
        metrics = {}
        obs, action, extr_reward, discount, next_obs = batch
        obs = self.aug_and_encode(obs)
        with torch.no_grad():
            next_obs = self.aug_and_encode(next_obs)

        if self.reward_free:
            metrics.update(self.update_icm(obs, action, next_obs))
            with torch.no_grad():
                reward, _ = self.icm(obs, action, next_obs)
        else:
            reward = extr_reward

        if not self.update_encoder:
            obs = obs.detach()
            next_obs = next_obs.detach()

        metrics.update(self.update_critic(obs.detach(), action, reward, discount, next_obs.detach()))
        return metrics


if __name__ == "__main__":
    torch.manual_seed(0)
    # fine-tuning phase: extrinsic reward, and the encoder is meant to train with the critic
    agent = ICMAgent(obs_dim=10, action_dim=3, reward_free=False, update_encoder=True)
    batch = (torch.randn(8, 10), torch.rand(8, 3) * 2 - 1, torch.randn(8, 1), torch.full((8, 1), 0.99), torch.randn(8, 10))
    enc_before = [p.detach().clone() for p in agent.encoder.parameters()]
    critic_before = [p.detach().clone() for p in agent.critic.parameters()]
    agent.update(batch)
    assert all(p.grad is None for p in agent.encoder.parameters())
    assert all(torch.equal(a, b) for a, b in zip(enc_before, agent.encoder.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(critic_before, agent.critic.parameters()))
    print("evidence holds: update_encoder=True but the encoder got no gradient from the critic loss and did not change")
