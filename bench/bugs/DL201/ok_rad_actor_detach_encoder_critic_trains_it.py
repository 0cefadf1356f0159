# source: https://github.com/MishaLaskin/rad/issues/4
# category: DL201
# expect: clean
# evidence: the shared conv encoder gets gradients from the critic loss and changes; the actor update (detach_encoder=True) leaves it alone by design
import torch
import torch.nn as nn
import torch.nn.functional as F


def tie_weights(src, trg):
    assert type(src) == type(trg)
    trg.weight = src.weight
    trg.bias = src.bias


class PixelEncoder(nn.Module):
    def __init__(self, obs_shape, feature_dim=16, num_filters=8):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(obs_shape[0], num_filters, 3, stride=2), nn.Conv2d(num_filters, num_filters, 3, stride=1)])
        self.fc = nn.Linear(num_filters * 3 * 3, feature_dim)
        self.ln = nn.LayerNorm(feature_dim)

    def forward_conv(self, obs):
        conv = torch.relu(self.convs[0](obs / 255.0))
        conv = torch.relu(self.convs[1](conv))
        return conv.view(conv.size(0), -1)

    def forward(self, obs, detach=False):
        h = self.forward_conv(obs)
        if detach:
            h = h.detach()
        return torch.tanh(self.ln(self.fc(h)))

    def copy_conv_weights_from(self, source):
        for i in range(len(self.convs)):
            tie_weights(src=source.convs[i], trg=self.convs[i])


class Actor(nn.Module):
    def __init__(self, obs_shape, action_dim, hidden_dim=32):
        super().__init__()
        self.encoder = PixelEncoder(obs_shape)
        self.trunk = nn.Sequential(nn.Linear(16, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 2 * action_dim))

    def forward(self, obs, detach_encoder=False):
        obs = self.encoder(obs, detach=detach_encoder)
        mu, log_std = self.trunk(obs).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        std = log_std.exp()
        pi = mu + torch.randn_like(mu) * std
        log_pi = (-0.5 * ((pi - mu) / std).pow(2) - log_std).sum(-1, keepdim=True)
        return torch.tanh(mu), torch.tanh(pi), log_pi, log_std


class Critic(nn.Module):
    def __init__(self, obs_shape, action_dim, hidden_dim=32):
        super().__init__()
        self.encoder = PixelEncoder(obs_shape)
        self.Q1 = nn.Sequential(nn.Linear(16 + action_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 1))

    def forward(self, obs, action, detach_encoder=False):
        obs = self.encoder(obs, detach=detach_encoder)
        return self.Q1(torch.cat([obs, action], dim=1))


class RadSacAgent:
    def __init__(self, obs_shape, action_dim, discount=0.99, init_temperature=0.1):
        self.discount = discount
        self.actor = Actor(obs_shape, action_dim)
        self.critic = Critic(obs_shape, action_dim)
        self.critic_target = Critic(obs_shape, action_dim)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.actor.encoder.copy_conv_weights_from(self.critic.encoder)
        self.log_alpha = torch.tensor(init_temperature).log().requires_grad_(True)
        self.target_entropy = -float(action_dim)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=1e-3)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-3)
        self.log_alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=1e-4)

    @property
    def alpha(self):
        return self.log_alpha.exp()

    def update_critic(self, obs, action, reward, next_obs, not_done):
        with torch.no_grad():
            _, policy_action, log_pi, _ = self.actor(next_obs)
            target_Q = self.critic_target(next_obs, policy_action) - self.alpha.detach() * log_pi
            target_Q = reward + not_done * self.discount * target_Q
        current_Q = self.critic(obs, action)
        critic_loss = F.mse_loss(current_Q, target_Q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

    def update_actor_and_alpha(self, obs):
        _, pi, log_pi, _ = self.actor(obs, detach_encoder=True)
        actor_Q = self.critic(obs, pi, detach_encoder=True)
        actor_loss = (self.alpha.detach() * log_pi - actor_Q).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        self.log_alpha_optimizer.zero_grad()
        alpha_loss = (self.alpha * (-log_pi - self.target_entropy).detach()).mean()
        alpha_loss.backward()
        self.log_alpha_optimizer.step()

    def update(self, batch):
        obs, action, reward, next_obs, not_done = batch
        self.update_critic(obs, action, reward, next_obs, not_done)
        self.update_actor_and_alpha(obs)


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = RadSacAgent(obs_shape=(3, 11, 11), action_dim=2)
    batch = (torch.randint(0, 255, (5, 3, 11, 11)).float(), torch.rand(5, 2) * 2 - 1, torch.randn(5, 1),
             torch.randint(0, 255, (5, 3, 11, 11)).float(), torch.ones(5, 1))
    conv = agent.critic.encoder.convs[0].weight
    assert conv is agent.actor.encoder.convs[0].weight
    before = conv.detach().clone()
    agent.update(batch)
    assert not torch.equal(before, conv)
    obs = batch[0]
    critic_loss = F.mse_loss(agent.critic(obs, batch[1]), batch[2])
    assert torch.autograd.grad(critic_loss, conv)[0].abs().sum() > 0
    print("evidence holds: the shared encoder is trained by the critic loss; the actor's detach only keeps the actor loss out")
