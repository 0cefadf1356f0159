# source: https://github.com/quantumiracle/Popular-RL-Algorithms/blob/master/sac_v2_lstm.py
# category: DL603
# expect: clean
# evidence: the target Q value is computed with autograd on but passed to the criterion as target_q_value.detach(), so the target nets and the policy get no gradient from the Q losses; the Q nets, policy and alpha all train
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.nn.functional as F
from torch.distributions import Normal

class QNetwork(nn.Module):
    def __init__(self, state_dim, action_dim, hidden_dim):
        super().__init__()
        self.linear1 = nn.Linear(state_dim + action_dim, hidden_dim)
        self.linear2 = nn.Linear(hidden_dim, 1)

    def forward(self, state, action):
        return self.linear2(F.relu(self.linear1(torch.cat([state, action], -1))))

class SAC_PolicyNetwork(nn.Module):
    def __init__(self, state_dim, action_dim, hidden_dim, action_range=1., log_std_min=-20, log_std_max=2):
        super().__init__()
        self.linear1 = nn.Linear(state_dim, hidden_dim)
        self.mean_linear = nn.Linear(hidden_dim, action_dim)
        self.log_std_linear = nn.Linear(hidden_dim, action_dim)
        self.action_range = action_range
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def forward(self, state):
        x = F.relu(self.linear1(state))
        mean = self.mean_linear(x)
        log_std = torch.clamp(self.log_std_linear(x), self.log_std_min, self.log_std_max)
        return mean, log_std

    def evaluate(self, state, epsilon=1e-6):
        mean, log_std = self.forward(state)
        std = log_std.exp()
        z = Normal(0, 1).sample(mean.shape)
        action_0 = torch.tanh(mean + std * z)
        action = self.action_range * action_0
        log_prob = Normal(mean, std).log_prob(mean + std * z) - torch.log(1. - action_0.pow(2) + epsilon) - np.log(self.action_range)
        log_prob = log_prob.sum(dim=-1, keepdim=True)
        return action, log_prob, z, mean, log_std

class SAC_Trainer():
    def __init__(self, replay_buffer, state_dim, action_dim, hidden_dim, action_range):
        self.replay_buffer = replay_buffer
        self.soft_q_net1 = QNetwork(state_dim, action_dim, hidden_dim)
        self.soft_q_net2 = QNetwork(state_dim, action_dim, hidden_dim)
        self.target_soft_q_net1 = QNetwork(state_dim, action_dim, hidden_dim)
        self.target_soft_q_net2 = QNetwork(state_dim, action_dim, hidden_dim)
        self.policy_net = SAC_PolicyNetwork(state_dim, action_dim, hidden_dim, action_range)
        self.log_alpha = torch.zeros(1, dtype=torch.float32, requires_grad=True)

        for target_param, param in zip(self.target_soft_q_net1.parameters(), self.soft_q_net1.parameters()):
            target_param.data.copy_(param.data)
        for target_param, param in zip(self.target_soft_q_net2.parameters(), self.soft_q_net2.parameters()):
            target_param.data.copy_(param.data)

        self.soft_q_criterion1 = nn.MSELoss()
        self.soft_q_criterion2 = nn.MSELoss()
        self.soft_q_optimizer1 = optim.Adam(self.soft_q_net1.parameters(), lr=3e-4)
        self.soft_q_optimizer2 = optim.Adam(self.soft_q_net2.parameters(), lr=3e-4)
        self.policy_optimizer = optim.Adam(self.policy_net.parameters(), lr=3e-4)
        self.alpha_optimizer = optim.Adam([self.log_alpha], lr=3e-4)

    def update(self, batch_size, reward_scale=10., auto_entropy=True, target_entropy=-2, gamma=0.99, soft_tau=1e-2):
        state, action, reward, next_state, done = self.replay_buffer.sample(batch_size)
        state = torch.FloatTensor(state)
        next_state = torch.FloatTensor(next_state)
        action = torch.FloatTensor(action)
        reward = torch.FloatTensor(reward).unsqueeze(-1)
        done = torch.FloatTensor(np.float32(done)).unsqueeze(-1)

        predicted_q_value1 = self.soft_q_net1(state, action)
        predicted_q_value2 = self.soft_q_net2(state, action)
        new_action, log_prob, z, mean, log_std = self.policy_net.evaluate(state)
        new_next_action, next_log_prob, _, _, _ = self.policy_net.evaluate(next_state)
        reward = reward_scale * (reward - reward.mean(dim=0)) / (reward.std(dim=0) + 1e-6)

        # alpha update from the entropy gap
        if auto_entropy is True:
            alpha_loss = -(self.log_alpha * (log_prob + target_entropy).detach()).mean()
            self.alpha_optimizer.zero_grad()
            alpha_loss.backward()
            self.alpha_optimizer.step()
            self.alpha = self.log_alpha.exp()
        else:
            self.alpha = 1.
            alpha_loss = 0

        # Q functions
        target_q_min = torch.min(self.target_soft_q_net1(next_state, new_next_action),
                                 self.target_soft_q_net2(next_state, new_next_action)) - self.alpha * next_log_prob
        target_q_value = reward + (1 - done) * gamma * target_q_min
        q_value_loss1 = self.soft_q_criterion1(predicted_q_value1, target_q_value.detach())
        q_value_loss2 = self.soft_q_criterion2(predicted_q_value2, target_q_value.detach())

        self.soft_q_optimizer1.zero_grad()
        q_value_loss1.backward()
        self.soft_q_optimizer1.step()
        self.soft_q_optimizer2.zero_grad()
        q_value_loss2.backward()
        self.soft_q_optimizer2.step()

        # policy
        predicted_new_q_value = torch.min(self.soft_q_net1(state, new_action), self.soft_q_net2(state, new_action))
        policy_loss = (self.alpha * log_prob - predicted_new_q_value).mean()
        self.policy_optimizer.zero_grad()
        policy_loss.backward()
        self.policy_optimizer.step()

        # soft update of the target nets
        for target_param, param in zip(self.target_soft_q_net1.parameters(), self.soft_q_net1.parameters()):
            target_param.data.copy_(target_param.data * (1.0 - soft_tau) + param.data * soft_tau)
        for target_param, param in zip(self.target_soft_q_net2.parameters(), self.soft_q_net2.parameters()):
            target_param.data.copy_(target_param.data * (1.0 - soft_tau) + param.data * soft_tau)
        return predicted_new_q_value.mean()

class ReplayBuffer:
    def __init__(self, n, state_dim, action_dim):
        self.s, self.a = np.random.randn(n, state_dim), np.random.uniform(-1, 1, (n, action_dim))
        self.r, self.s2, self.d = np.random.randn(n), np.random.randn(n, state_dim), np.random.rand(n) < 0.1

    def sample(self, batch_size):
        i = np.random.choice(len(self.r), batch_size)
        return self.s[i], self.a[i], self.r[i], self.s2[i], self.d[i]

if __name__ == "__main__":
    np.random.seed(0)
    torch.manual_seed(0)
    trainer = SAC_Trainer(ReplayBuffer(64, 3, 2), state_dim=3, action_dim=2, hidden_dim=16, action_range=1.)
    policy_hits, target_hits = [], []
    trainer.policy_net.linear1.weight.register_hook(lambda g: policy_hits.append(1))
    trainer.target_soft_q_net1.linear1.weight.register_hook(lambda g: target_hits.append(1))
    q0 = trainer.soft_q_net1.linear1.weight.detach().clone()

    for _ in range(3):
        trainer.update(batch_size=8, target_entropy=-2.)

    assert target_hits == [] and trainer.target_soft_q_net1.linear1.weight.grad is None
    assert len(policy_hits) == 3  # the policy is reached by policy_loss only, not by the Q losses
    assert not torch.equal(q0, trainer.soft_q_net1.linear1.weight)
    assert trainer.log_alpha.grad is not None
    print("evidence holds: target_q_value.detach() keeps the target nets and the policy out of the Q losses")
