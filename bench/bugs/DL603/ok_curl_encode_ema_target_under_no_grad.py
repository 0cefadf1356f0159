# source: https://github.com/MishaLaskin/curl/issues/12
# category: DL603
# expect: clean
# evidence: the momentum (target) encoder's output z_pos is computed inside CURL.encode(ema=True) under torch.no_grad, so after update_cpc the target encoder's params have grad None while the online encoder and W get gradients and change.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


def soft_update_params(net, target_net, tau):
    for param, target_param in zip(net.parameters(), target_net.parameters()):
        target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


class PixelEncoder(nn.Module):
    def __init__(self, obs_shape, feature_dim):
        super().__init__()
        self.conv = nn.Conv2d(obs_shape[0], 4, 3, stride=2)
        out = (obs_shape[1] - 3) // 2 + 1
        self.fc = nn.Linear(4 * out * out, feature_dim)
        self.ln = nn.LayerNorm(feature_dim)

    def forward(self, obs, detach=False):
        h = torch.relu(self.conv(obs / 255.0))
        h = h.view(h.size(0), -1)
        if detach:
            h = h.detach()
        return torch.tanh(self.ln(self.fc(h)))


class Critic(nn.Module):
    def __init__(self, obs_shape, action_dim, feature_dim):
        super().__init__()
        self.encoder = PixelEncoder(obs_shape, feature_dim)
        self.Q1 = nn.Linear(feature_dim + action_dim, 1)

    def forward(self, obs, action, detach_encoder=False):
        z = self.encoder(obs, detach=detach_encoder)
        return self.Q1(torch.cat([z, action], dim=1))


class CURL(nn.Module):
    """CURL"""

    def __init__(self, obs_shape, z_dim, batch_size, critic, critic_target, output_type="continuous"):
        super(CURL, self).__init__()
        self.batch_size = batch_size
        self.encoder = critic.encoder
        self.encoder_target = critic_target.encoder
        self.W = nn.Parameter(torch.rand(z_dim, z_dim))
        self.output_type = output_type

    def encode(self, x, detach=False, ema=False):
        """
        Encoder: z_t = e(x_t)
        :param x: x_t, x y coordinates
        :return: z_t, value in r2
        """
        if ema:
            with torch.no_grad():
                z_out = self.encoder_target(x)
        else:
            z_out = self.encoder(x)

        if detach:
            z_out = z_out.detach()
        return z_out

    def compute_logits(self, z_a, z_pos):
        """
        Uses logits trick for CURL:
        - compute (B,B) matrix z_a (W z_pos.T)
        - positives are all diagonal elements
        - negatives are all other elements
        - to compute loss use multiclass cross entropy with identity matrix for labels
        """
        Wz = torch.matmul(self.W, z_pos.T)  # (z_dim,B)
        logits = torch.matmul(z_a, Wz)  # (B,B)
        logits = logits - torch.max(logits, 1)[0][:, None]
        return logits


class CurlSacAgent(object):
    def __init__(self, obs_shape, action_dim, encoder_feature_dim=8, encoder_tau=0.05, batch_size=6):
        self.encoder_tau = encoder_tau
        self.critic = Critic(obs_shape, action_dim, encoder_feature_dim)
        self.critic_target = copy.deepcopy(self.critic)
        self.CURL = CURL(obs_shape, encoder_feature_dim, batch_size, self.critic, self.critic_target)
        self.encoder_optimizer = torch.optim.Adam(self.critic.encoder.parameters(), lr=1e-2)
        self.cpc_optimizer = torch.optim.Adam(self.CURL.parameters(), lr=1e-2)
        self.cross_entropy_loss = nn.CrossEntropyLoss()

    def update_cpc(self, obs_anchor, obs_pos, cpc_kwargs, L=None, step=0):
        z_a = self.CURL.encode(obs_anchor)
        z_pos = self.CURL.encode(obs_pos, ema=True)

        logits = self.CURL.compute_logits(z_a, z_pos)
        labels = torch.arange(logits.shape[0]).long()
        loss = self.cross_entropy_loss(logits, labels)

        self.encoder_optimizer.zero_grad()
        self.cpc_optimizer.zero_grad()
        loss.backward()

        self.encoder_optimizer.step()
        self.cpc_optimizer.step()
        return loss.item()

    def update(self, replay_buffer, step):
        obs, action, reward, next_obs, not_done, cpc_kwargs = replay_buffer.sample_cpc()
        loss = self.update_cpc(cpc_kwargs["obs_anchor"], cpc_kwargs["obs_pos"], cpc_kwargs, step=step)
        if step % 2 == 0:
            soft_update_params(self.critic.encoder, self.critic_target.encoder, self.encoder_tau)
        return loss


class ReplayBuffer(object):
    def __init__(self, obs_shape, batch_size):
        self.obs_shape = obs_shape
        self.batch_size = batch_size

    def sample_cpc(self):
        b = self.batch_size
        obs = torch.randint(0, 256, (b,) + self.obs_shape).float()
        pos = (obs + torch.randn_like(obs) * 8).clamp(0, 255)
        action = torch.randn(b, 2)
        cpc_kwargs = dict(obs_anchor=obs, obs_pos=pos, time_anchor=None, time_pos=None)
        return obs, action, torch.randn(b, 1), obs.clone(), torch.ones(b, 1), cpc_kwargs


if __name__ == "__main__":
    torch.manual_seed(0)
    obs_shape = (3, 9, 9)
    agent = CurlSacAgent(obs_shape, action_dim=2)
    replay_buffer = ReplayBuffer(obs_shape, batch_size=6)
    enc_before = [p.detach().clone() for p in agent.critic.encoder.parameters()]
    W_before = agent.CURL.W.detach().clone()

    # one update on an odd step: no soft update, so only gradients can move the target
    tgt_before = [p.detach().clone() for p in agent.critic_target.encoder.parameters()]
    agent.update(replay_buffer, step=1)
    for p, b in zip(agent.critic_target.encoder.parameters(), tgt_before):
        assert p.grad is None
        assert torch.equal(p.detach(), b)

    for step in range(2, 6):
        agent.update(replay_buffer, step)

    assert all(p.grad is None for p in agent.critic_target.encoder.parameters())
    assert all(p.grad is not None for p in agent.critic.encoder.parameters())
    assert agent.CURL.W.grad is not None
    with torch.no_grad():
        assert not torch.equal(agent.CURL.W, W_before)
        assert any(not torch.equal(p, b) for p, b in zip(agent.critic.encoder.parameters(), enc_before))
    print("evidence holds: target encoder gets no grad (z_pos under no_grad); online encoder and W are trained")
