# source: https://github.com/rll-research/cic/issues/5
# category: DL201
# expect: flag 105, 106
# evidence: on pixel observations update() steps encoder_opt inside update_critic, but the CNN encoder's grads stay None and its weights never change
import torch
import torch.nn as nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, obs_shape):
        super().__init__()
        self.repr_dim = 8 * 3 * 3
        self.convnet = nn.Sequential(nn.Conv2d(obs_shape[0], 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=1), nn.ReLU())

    def forward(self, obs):
        h = self.convnet(obs / 255.0 - 0.5)
        return h.view(h.shape[0], -1)


class DDPGAgent:
    def __init__(self, obs_type, obs_shape, action_dim, hidden_dim=32, lr=1e-2, meta_dim=0):
        if obs_type == "pixels":
            self.encoder = Encoder(obs_shape)
            self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
            self.obs_dim = self.encoder.repr_dim + meta_dim
        else:
            self.encoder = nn.Identity()
            self.encoder_opt = None
            self.obs_dim = obs_shape[0] + meta_dim
        self.lr = lr
        self.actor = nn.Sequential(nn.Linear(self.obs_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, action_dim), nn.Tanh())
        self.critic = nn.Sequential(nn.Linear(self.obs_dim + action_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 1))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)

    def aug_and_encode(self, obs):
        return self.encoder(obs)

    def update_critic(self, obs, action, reward, discount, next_obs, step):
        with torch.no_grad():
            next_action = self.actor(next_obs)
            target_Q = reward + discount * self.critic(torch.cat([next_obs, next_action], 1))
        Q = self.critic(torch.cat([obs, action], 1))
        critic_loss = F.mse_loss(Q, target_Q)
        if self.encoder_opt is not None:
            self.encoder_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        if self.encoder_opt is not None:
            self.encoder_opt.step()
        return {"critic_loss": critic_loss.item()}

    def update_actor(self, obs, step):
        action = self.actor(obs)
        actor_loss = -self.critic(torch.cat([obs, action], 1)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        return {"actor_loss": actor_loss.item()}


class CIC(nn.Module):
    def __init__(self, obs_dim, skill_dim, hidden_dim):
        super().__init__()
        self.state_net = nn.Sequential(nn.Linear(obs_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, skill_dim))
        self.pred_net = nn.Sequential(nn.Linear(2 * skill_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, skill_dim))

    def forward(self, state, next_state, skill):
        state = self.state_net(state)
        next_state = self.state_net(next_state)
        key = self.pred_net(torch.cat([state, next_state], 1))
        return skill, key


class CICAgent(DDPGAgent):
    def __init__(self, skill_dim, temp, **kwargs):
        self.skill_dim = skill_dim
        self.temp = temp
        self.reward_free = True
        kwargs["meta_dim"] = skill_dim
        super().__init__(**kwargs)
        self.cic = CIC(self.obs_dim - skill_dim, skill_dim, 32)
        self.cic_optimizer = torch.optim.Adam(self.cic.parameters(), lr=self.lr)

    def compute_cpc_loss(self, obs, next_obs, skill):
        query, key = self.cic(obs, next_obs, skill)
        query, key = F.normalize(query, dim=1), F.normalize(key, dim=1)
        logits = torch.mm(query, key.T) / self.temp
        labels = torch.arange(logits.shape[0])
        return F.cross_entropy(logits, labels)

    def update_cic(self, obs, skill, next_obs, step):
        loss = self.compute_cpc_loss(obs, next_obs, skill)
        self.cic_optimizer.zero_grad()
        loss.backward()
        self.cic_optimizer.step()
        return {"cic_loss": loss.item()}

    def update(self, batch, step):
        metrics = dict()
        obs, action, extr_reward, discount, next_obs, skill = batch

        with torch.no_grad():
            obs = self.aug_and_encode(obs)
            next_obs = self.aug_and_encode(next_obs)

        metrics.update(self.update_cic(obs, skill, next_obs, step))
        with torch.no_grad():
            reward = torch.norm(obs - next_obs, dim=1, keepdim=True)

        obs = torch.cat([obs, skill], dim=1)
        next_obs = torch.cat([next_obs, skill], dim=1)
        metrics.update(self.update_critic(obs, action, reward, discount, next_obs, step))
        metrics.update(self.update_actor(obs.detach(), step))
        return metrics


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = CICAgent(skill_dim=4, temp=0.5, obs_type="pixels", obs_shape=(3, 11, 11), action_dim=2)
    n = 6
    batch = (torch.randint(0, 255, (n, 3, 11, 11)).float(), torch.rand(n, 2) * 2 - 1, torch.zeros(n, 1),
             torch.full((n, 1), 0.99), torch.randint(0, 255, (n, 3, 11, 11)).float(), torch.rand(n, 4))
    before = [p.detach().clone() for p in agent.encoder.parameters()]
    for step in range(3):
        agent.update(batch, step)
    assert all(p.grad is None for p in agent.encoder.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, agent.encoder.parameters()))
    assert all(p.grad is not None for p in agent.critic.parameters())
    print("evidence holds: the pixel encoder is stepped by encoder_opt but never receives a gradient; it stays at init")
