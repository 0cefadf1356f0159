# source: https://github.com/toshikwa/sac-discrete.pytorch/blob/master/sacd/agent/sacd.py
# category: DL303
# expect: clean
# evidence: calc_policy_loss evaluates the online critic under torch.no_grad(), but the policy's action probabilities carry the graph, so the policy step moves the policy while the critic gets no gradient from it
import torch
from torch import nn
from torch.optim import Adam
import torch.nn.functional as F


def update_params(optim, loss, retain_graph=False):
    optim.zero_grad()
    loss.backward(retain_graph=retain_graph)
    optim.step()


class TwinnedQNetwork(nn.Module):
    def __init__(self, state_dim, num_actions):
        super().__init__()
        self.Q1 = nn.Sequential(nn.Linear(state_dim, 32), nn.ReLU(), nn.Linear(32, num_actions))
        self.Q2 = nn.Sequential(nn.Linear(state_dim, 32), nn.ReLU(), nn.Linear(32, num_actions))

    def forward(self, states):
        return self.Q1(states), self.Q2(states)


class CateoricalPolicy(nn.Module):
    def __init__(self, state_dim, num_actions):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(state_dim, 32), nn.ReLU(), nn.Linear(32, num_actions))

    def sample(self, states):
        action_probs = F.softmax(self.head(states), dim=1)
        action_dist = torch.distributions.Categorical(action_probs)
        actions = action_dist.sample().view(-1, 1)
        z = (action_probs == 0.0).float() * 1e-8
        log_action_probs = torch.log(action_probs + z)
        return actions, action_probs, log_action_probs


class SacdAgent:
    def __init__(self, state_dim, num_actions, lr=3e-4, gamma=0.99):
        self.policy = CateoricalPolicy(state_dim, num_actions)
        self.online_critic = TwinnedQNetwork(state_dim, num_actions)
        self.target_critic = TwinnedQNetwork(state_dim, num_actions)
        self.target_critic.load_state_dict(self.online_critic.state_dict())
        for p in self.target_critic.parameters():
            p.requires_grad = False
        self.policy_optim = Adam(self.policy.parameters(), lr=lr)
        self.q1_optim = Adam(self.online_critic.Q1.parameters(), lr=lr)
        self.q2_optim = Adam(self.online_critic.Q2.parameters(), lr=lr)
        self.alpha = 0.2
        self.gamma = gamma

    def calc_current_q(self, states, actions, rewards, next_states, dones):
        curr_q1, curr_q2 = self.online_critic(states)
        return curr_q1.gather(1, actions.long()), curr_q2.gather(1, actions.long())

    def calc_target_q(self, states, actions, rewards, next_states, dones):
        with torch.no_grad():
            _, action_probs, log_action_probs = self.policy.sample(next_states)
            next_q1, next_q2 = self.target_critic(next_states)
            next_q = (action_probs * (torch.min(next_q1, next_q2) - self.alpha * log_action_probs)).sum(dim=1, keepdim=True)
        return rewards + (1.0 - dones) * self.gamma * next_q

    def calc_critic_loss(self, batch, weights):
        curr_q1, curr_q2 = self.calc_current_q(*batch)
        target_q = self.calc_target_q(*batch)
        q1_loss = torch.mean((curr_q1 - target_q).pow(2) * weights)
        q2_loss = torch.mean((curr_q2 - target_q).pow(2) * weights)
        return q1_loss, q2_loss

    def calc_policy_loss(self, batch, weights):
        states, actions, rewards, next_states, dones = batch
        # (Log of) probabilities to calculate expectations of Q and entropies.
        _, action_probs, log_action_probs = self.policy.sample(states)
        with torch.no_grad():
            # Q for every action to calculate expectations of Q.
            q1, q2 = self.online_critic(states)
            q = torch.min(q1, q2)
        entropies = -torch.sum(action_probs * log_action_probs, dim=1, keepdim=True)
        q = torch.sum(q * action_probs, dim=1, keepdim=True)
        policy_loss = (weights * (- q - self.alpha * entropies)).mean()
        return policy_loss, entropies.detach()

    def learn(self, batch):
        weights = 1.
        q1_loss, q2_loss = self.calc_critic_loss(batch, weights)
        policy_loss, entropies = self.calc_policy_loss(batch, weights)
        update_params(self.q1_optim, q1_loss)
        update_params(self.q2_optim, q2_loss)
        update_params(self.policy_optim, policy_loss)
        return policy_loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = SacdAgent(state_dim=4, num_actions=3)
    batch = (torch.randn(8, 4), torch.randint(0, 3, (8, 1)), torch.randn(8, 1),
             torch.randn(8, 4), torch.zeros(8, 1))
    pol0 = agent.policy.head[0].weight.detach().clone()

    policy_loss, _ = agent.calc_policy_loss(batch, 1.)
    agent.online_critic.zero_grad()
    policy_loss.backward()
    assert all(p.grad is None for p in agent.online_critic.parameters())  # the critic is a fixed scorer here
    assert all(p.grad is not None for p in agent.policy.parameters())

    agent.policy.zero_grad()
    agent.learn(batch)
    assert not torch.equal(pol0, agent.policy.head[0].weight.detach())
    print("evidence holds: the critic is read under no_grad, the policy loss still trains the policy")
