# source: https://github.com/Quantum-Cheese/DeepReinforcementLearning_Pytorch/issues/1
# category: DL201
# expect: flag 64
# evidence: after the worker's learn() the actor head of the local net has grad None (only the critic head trains), and the pushed global actor weights never change
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self, state_size, action_size, hidden=32):
        super().__init__()
        self.fc = nn.Linear(state_size, hidden)
        self.actor = nn.Linear(hidden, action_size)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, state):
        x = F.relu(self.fc(state))
        return F.softmax(self.actor(x), dim=-1), self.critic(x)


class ToyEnv:
    def __init__(self, state_size=4, horizon=8):
        self.state_size, self.horizon, self.t = state_size, horizon, 0

    def reset(self):
        self.t = 0
        return np.random.randn(self.state_size).astype(np.float32)

    def step(self, action):
        self.t += 1
        reward = 1.0 if action == 0 else 0.0
        return np.random.randn(self.state_size).astype(np.float32), reward, self.t >= self.horizon


class Worker:
    def __init__(self, global_net, optimizer, env, gamma=0.99):
        self.global_net = global_net
        self.optimizer = optimizer
        self.local_net = ActorCritic(4, 2)
        self.local_net.load_state_dict(global_net.state_dict())
        self.env = env
        self.gamma = gamma
        self.memory = []

    def act(self, state):
        probs, value = self.local_net(torch.from_numpy(state).unsqueeze(0))
        m = Categorical(probs)
        action = m.sample()
        return action.item(), m.log_prob(action), value

    def learn(self):
        R = 0.0
        returns = []
        for _, _, r in reversed(self.memory):
            R = r + self.gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns, dtype=torch.float).unsqueeze(1)
        values = torch.cat([t[0] for t in self.memory])
        log_probs = torch.tensor([t[1] for t in self.memory], dtype=torch.float)
        advantages = returns - values.detach()
        policy_loss = -(log_probs.unsqueeze(1) * advantages).mean()
        value_loss = F.mse_loss(values, returns)
        loss = policy_loss + 0.5 * value_loss

        self.optimizer.zero_grad()
        self.local_net.zero_grad()
        loss.backward()
        for lp, gp in zip(self.local_net.parameters(), self.global_net.parameters()):
            gp._grad = lp.grad
        self.optimizer.step()
        self.local_net.load_state_dict(self.global_net.state_dict())
        self.memory = []

    def run_episode(self):
        state = self.env.reset()
        done = False
        while not done:
            action, log_prob, value = self.act(state)
            state, reward, done = self.env.step(action)
            self.memory.append((value, log_prob, reward))
        self.learn()


if __name__ == "__main__":
    warnings.simplefilter("ignore", UserWarning)
    torch.manual_seed(0)
    np.random.seed(0)
    global_net = ActorCritic(4, 2)
    optimizer = torch.optim.Adam(global_net.parameters(), lr=1e-2)
    worker = Worker(global_net, optimizer, ToyEnv())
    actor_before = global_net.actor.weight.detach().clone()
    critic_before = global_net.critic.weight.detach().clone()
    worker.run_episode()
    assert worker.local_net.actor.weight.grad is None and worker.local_net.actor.bias.grad is None
    assert torch.equal(actor_before, global_net.actor.weight)
    assert not torch.equal(critic_before, global_net.critic.weight)
    print("evidence holds: log_probs rebuilt with torch.tensor carry no graph, so the policy head never gets a gradient")
