# source: https://github.com/rll-research/url_benchmark/issues/16
# category: DL201
# expect: flag 98
# evidence: with update_encoder=True and an extrinsic reward, update() steps encoder_opt but the encoder's grad stays None and its weights do not move
import torch
from torch import nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, obs_shape):
        super().__init__()
        self.repr_dim = 8 * 3 * 3
        self.convnet = nn.Sequential(nn.Conv2d(obs_shape[0], 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=1), nn.ReLU())

    def forward(self, obs):
        obs = obs / 255.0 - 0.5
        h = self.convnet(obs)
        return h.view(h.shape[0], -1)


class Actor(nn.Module):
    def __init__(self, repr_dim, action_dim):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(repr_dim, 32), nn.ReLU(), nn.Linear(32, action_dim))

    def forward(self, obs):
        return torch.tanh(self.policy(obs))


class Critic(nn.Module):
    def __init__(self, repr_dim, action_dim):
        super().__init__()
        self.Q1 = nn.Sequential(nn.Linear(repr_dim + action_dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, obs, action):
        return self.Q1(torch.cat([obs, action], dim=-1))


def compute_apt_reward(source, target, knn_k=3):
    sim_matrix = torch.norm(source[:, None, :] - target[None, :, :], dim=-1, p=2)
    reward, _ = sim_matrix.topk(knn_k, dim=1, largest=False, sorted=True)
    return torch.log(1.0 + reward.mean(dim=1, keepdim=True))


class ICMAPTAgent:
    def __init__(self, obs_shape, action_dim, reward_free, update_encoder=True, lr=1e-2):
        self.reward_free = reward_free
        self.update_encoder = update_encoder
        self.encoder = Encoder(obs_shape)
        self.actor = Actor(self.encoder.repr_dim, action_dim)
        self.critic = Critic(self.encoder.repr_dim, action_dim)
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.discount = 0.99

    def aug_and_encode(self, obs):
        return self.encoder(obs)

    def update_critic(self, obs, action, reward, discount, next_obs, step):
        with torch.no_grad():
            next_action = self.actor(next_obs)
            target_Q = reward + discount * self.critic(next_obs, next_action)
        Q = self.critic(obs, action)
        critic_loss = F.mse_loss(Q, target_Q)
        self.encoder_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.encoder_opt.step()
        return {"critic_loss": critic_loss.item()}

    def update_actor(self, obs, step):
        action = self.actor(obs)
        actor_loss = -self.critic(obs, action).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        return {"actor_loss": actor_loss.item()}

    def update(self, batch, step):
        metrics = dict()
        obs, action, extr_reward, discount, next_obs = batch
        obs = self.aug_and_encode(obs)
        next_obs = self.aug_and_encode(next_obs)

        if self.reward_free:
            with torch.no_grad():
                reward = compute_apt_reward(next_obs, next_obs)
        else:
            reward = extr_reward

        if not self.update_encoder:
            obs = obs.detach()
            next_obs = next_obs.detach()

        metrics.update(self.update_critic(obs.detach(), action, reward, discount, next_obs.detach(), step))
        metrics.update(self.update_actor(obs.detach(), step))
        return metrics


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = ICMAPTAgent(obs_shape=(3, 11, 11), action_dim=2, reward_free=False, update_encoder=True)
    batch = (torch.randint(0, 255, (6, 3, 11, 11)).float(), torch.rand(6, 2) * 2 - 1, torch.randn(6, 1),
             torch.full((6, 1), 0.99), torch.randint(0, 255, (6, 3, 11, 11)).float())
    before = [p.detach().clone() for p in agent.encoder.parameters()]
    metrics = agent.update(batch, step=0)
    assert all(p.grad is None for p in agent.encoder.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, agent.encoder.parameters()))
    assert all(p.grad is not None for p in agent.critic.parameters())
    print("evidence holds: encoder_opt steps after the critic loss, but the encoder has no gradient and is unchanged")
