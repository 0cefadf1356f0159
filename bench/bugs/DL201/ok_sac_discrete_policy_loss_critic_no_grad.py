# source: https://github.com/toshikwa/sac-discrete.pytorch/issues/3
# category: DL201
# expect: clean
# evidence: after learn() the critic has gradients from its own Q loss, the policy from the policy loss, and log_alpha from the entropy loss; every optimizer steps something real
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torch.optim import Adam


class QNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden=32):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(num_inputs, hidden), nn.ReLU(), nn.Linear(hidden, num_actions))

    def forward(self, states):
        return self.head(states)


class TwinnedQNetwork(nn.Module):
    def __init__(self, num_inputs, num_actions):
        super().__init__()
        self.Q1 = QNetwork(num_inputs, num_actions)
        self.Q2 = QNetwork(num_inputs, num_actions)

    def forward(self, states):
        return self.Q1(states), self.Q2(states)


class CateoricalPolicy(nn.Module):
    def __init__(self, num_inputs, num_actions, hidden=32):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(num_inputs, hidden), nn.ReLU(), nn.Linear(hidden, num_actions))

    def sample(self, states):
        action_probs = F.softmax(self.head(states), dim=1)
        action_dist = torch.distributions.Categorical(action_probs)
        actions = action_dist.sample().view(-1, 1)
        z = (action_probs == 0.0).float() * 1e-8
        log_action_probs = torch.log(action_probs + z)
        return actions, action_probs, log_action_probs


class SacdAgent:
    def __init__(self, num_inputs=6, num_actions=3, lr=3e-4, gamma=0.99, target_entropy_ratio=0.98):
        self.policy = CateoricalPolicy(num_inputs, num_actions)
        self.online_critic = TwinnedQNetwork(num_inputs, num_actions)
        self.target_critic = TwinnedQNetwork(num_inputs, num_actions)
        self.target_critic.load_state_dict(self.online_critic.state_dict())
        for param in self.target_critic.parameters():
            param.requires_grad = False
        self.policy_optim = Adam(self.policy.parameters(), lr=lr)
        self.q1_optim = Adam(self.online_critic.Q1.parameters(), lr=lr)
        self.q2_optim = Adam(self.online_critic.Q2.parameters(), lr=lr)
        self.target_entropy = -np.log(1.0 / num_actions) * target_entropy_ratio
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha = self.log_alpha.detach().exp()
        self.alpha_optim = Adam([self.log_alpha], lr=lr)
        self.gamma = gamma

    def calc_current_q(self, states, actions):
        curr_q1, curr_q2 = self.online_critic(states)
        return curr_q1.gather(1, actions.long()), curr_q2.gather(1, actions.long())

    def calc_target_q(self, rewards, next_states, dones):
        with torch.no_grad():
            _, action_probs, log_action_probs = self.policy.sample(next_states)
            next_q1, next_q2 = self.target_critic(next_states)
            next_q = (action_probs * (torch.min(next_q1, next_q2) - self.alpha * log_action_probs)).sum(dim=1, keepdim=True)
        return rewards + (1.0 - dones) * self.gamma * next_q

    def calc_critic_loss(self, batch):
        states, actions, rewards, next_states, dones = batch
        curr_q1, curr_q2 = self.calc_current_q(states, actions)
        target_q = self.calc_target_q(rewards, next_states, dones)
        return torch.mean((curr_q1 - target_q).pow(2)), torch.mean((curr_q2 - target_q).pow(2))

    def calc_policy_loss(self, batch):
        states = batch[0]
        _, action_probs, log_action_probs = self.policy.sample(states)
        with torch.no_grad():
            q1, q2 = self.online_critic(states)
            q = torch.min(q1, q2)
        entropies = -torch.sum(action_probs * log_action_probs, dim=1, keepdim=True)
        q = torch.sum(q * action_probs, dim=1, keepdim=True)
        policy_loss = (-q - self.alpha * entropies).mean()
        return policy_loss, entropies.detach()

    def calc_entropy_loss(self, entropies):
        return -torch.mean(self.log_alpha * (self.target_entropy - entropies))

    @staticmethod
    def update_params(optim, loss):
        optim.zero_grad()
        loss.backward()
        optim.step()

    def learn(self, batch):
        q1_loss, q2_loss = self.calc_critic_loss(batch)
        policy_loss, entropies = self.calc_policy_loss(batch)
        entropy_loss = self.calc_entropy_loss(entropies)
        self.update_params(self.q1_optim, q1_loss)
        self.update_params(self.q2_optim, q2_loss)
        self.update_params(self.policy_optim, policy_loss)
        self.update_params(self.alpha_optim, entropy_loss)
        self.alpha = self.log_alpha.detach().exp()


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = SacdAgent()
    n = 8
    batch = (torch.randn(n, 6), torch.randint(0, 3, (n, 1)), torch.randn(n, 1), torch.randn(n, 6), torch.zeros(n, 1))
    critic_before = agent.online_critic.Q1.head[0].weight.detach().clone()
    policy_before = agent.policy.head[0].weight.detach().clone()
    agent.learn(batch)
    assert all(p.grad is not None for p in agent.online_critic.parameters())
    assert all(p.grad is not None for p in agent.policy.parameters())
    assert agent.log_alpha.grad is not None
    assert not torch.equal(critic_before, agent.online_critic.Q1.head[0].weight)
    assert not torch.equal(policy_before, agent.policy.head[0].weight)
    print("evidence holds: the critic under no_grad in the policy loss is trained by its own Q loss; nothing the optimizers step goes without a gradient")
