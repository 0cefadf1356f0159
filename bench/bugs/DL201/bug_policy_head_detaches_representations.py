# source: https://github.com/lebrice/Sequoia/issues/71
# category: DL201
# expect: flag 39
# evidence: after the RL training step the BaselineModel's encoder has grad None on every parameter (the policy head's dense layer does get gradients)
from dataclasses import dataclass

import torch
from torch import nn, Tensor
from torch.distributions import Categorical


@dataclass
class PolicyHeadOutput:
    actions: Tensor
    action_dist: Categorical

    @property
    def action_log_prob(self) -> Tensor:
        return self.action_dist.log_prob(self.actions)


class ClassificationHead(nn.Module):
    def __init__(self, input_size, action_space_n, hidden=16):
        super().__init__()
        self.dense = nn.Sequential(nn.Linear(input_size, hidden), nn.ReLU(), nn.Linear(hidden, action_space_n))


class PolicyHead(ClassificationHead):
    def __init__(self, input_size, action_space_n, gamma=0.9):
        super().__init__(input_size, action_space_n)
        self.gamma = gamma

    def get_actions(self, representations):
        logits = self.dense(representations)
        action_dist = Categorical(logits=logits)
        return PolicyHeadOutput(actions=action_dist.sample(), action_dist=action_dist)

    def forward(self, observations, representations):
        representations = representations.float().detach()
        actions = self.get_actions(representations)
        return actions

    def get_episode_loss(self, log_probs, rewards):
        returns, R = [], 0.0
        for r in reversed(rewards):
            R = r + self.gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + 1e-6)
        return -(torch.stack(log_probs) * returns).sum()


class BaselineModel(nn.Module):
    def __init__(self, obs_size=6, hidden_size=12, n_actions=3):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(obs_size, hidden_size), nn.ReLU())
        self.output_head = PolicyHead(hidden_size, n_actions)

    def forward(self, observations):
        representations = self.encoder(observations)
        return self.output_head(observations, representations)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def run_episode(model, optimizer, episode_length=6, obs_size=6):
    log_probs, rewards = [], []
    for _ in range(episode_length):
        obs = torch.randn(1, obs_size)
        out = model(obs)
        log_probs.append(out.action_log_prob.squeeze(0))
        rewards.append(float(out.actions.item() == 0))
    loss = model.output_head.get_episode_loss(log_probs, rewards)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = BaselineModel()
    optimizer = model.configure_optimizers()
    run_episode(model, optimizer)
    assert all(p.grad is None for p in model.encoder.parameters())
    assert all(p.grad is not None for p in model.output_head.dense.parameters())
    print("evidence holds: the policy head detaches the representations, so the shared encoder gets no gradient")
