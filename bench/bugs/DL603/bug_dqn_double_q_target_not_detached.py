# source: https://github.com/AgileRL/AgileRL/pull/63
# category: DL603
# expect: flag 89, 98
# evidence: with double=True the bootstrapped q_target is computed by self.actor(next_states) without detach, so y_j carries a grad_fn and loss.backward() sends gradient through the TD target into the actor (the actor's gradient differs from the semi-gradient obtained with the target detached).
import copy
import random

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)


class EvolvableMLP(nn.Module):
    def __init__(self, num_inputs, num_outputs, hidden_size, device='cpu'):
        super().__init__()
        layers, last = [], num_inputs
        for h in hidden_size:
            layers += [nn.Linear(last, h), nn.ReLU()]
            last = h
        layers.append(nn.Linear(last, num_outputs))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class DQN():
    """The DQN algorithm class. DQN paper: https://arxiv.org/abs/1312.5602"""

    def __init__(self, state_dim, action_dim, one_hot, index=0,
                 net_config={'arch': 'mlp', 'h_size': [64, 64]},
                 batch_size=64, lr=1e-4, learn_step=5, gamma=0.99, tau=1e-3,
                 mutation=None, double=False, device='cpu'):
        self.algo = 'DQN'
        self.state_dim = state_dim
        self.action_dim = action_dim
        self.one_hot = one_hot
        self.net_config = net_config
        self.batch_size = batch_size
        self.lr = lr
        self.learn_step = learn_step
        self.gamma = gamma
        self.tau = tau
        self.mut = mutation
        self.device = device
        self.index = index
        self.double = double

        self.actor = EvolvableMLP(num_inputs=state_dim[0], num_outputs=action_dim,
                                  hidden_size=self.net_config['h_size'], device=self.device).to(self.device)
        self.actor_target = EvolvableMLP(num_inputs=state_dim[0], num_outputs=action_dim,
                                         hidden_size=self.net_config['h_size'], device=self.device).to(self.device)
        self.actor_target.load_state_dict(self.actor.state_dict())

        self.optimizer = optim.Adam(self.actor.parameters(), lr=self.lr)
        self.criterion = nn.MSELoss()

    def getAction(self, state, epsilon=0):
        state = torch.from_numpy(state).float().to(self.device)
        if len(state.size()) < 2:
            state = state.unsqueeze(0)
        if random.random() < epsilon:
            action = np.random.randint(0, self.action_dim, size=state.size()[0])
        else:
            self.actor.eval()
            with torch.no_grad():
                action_values = self.actor(state)
            self.actor.train()
            action = np.argmax(action_values.cpu().data.numpy(), axis=1)
        return action

    def learn(self, experiences):
        """Updates agent network parameters to learn from experiences."""
        states, actions, rewards, next_states, dones = experiences

        if self.one_hot:
            states = nn.functional.one_hot(
                states.long(), num_classes=self.state_dim[0]).float().squeeze()
            next_states = nn.functional.one_hot(
                next_states.long(), num_classes=self.state_dim[0]).float().squeeze()

        if self.double:  # Double Q-learning
            q_idx = self.actor_target(next_states).argmax(dim=1).unsqueeze(1)
            q_target = self.actor(next_states).gather(dim=1, index=q_idx)
        else:
            q_target = self.actor_target(next_states).detach().max(axis=1)[0].unsqueeze(1)

        # target, if terminal then y_j = rewards
        y_j = rewards + self.gamma * q_target * (1 - dones)
        q_eval = self.actor(states).gather(1, actions.long())

        # loss backprop
        loss = self.criterion(q_eval, y_j)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

        # soft update target network
        self.softUpdate()
        return y_j

    def softUpdate(self):
        """Soft updates target network."""
        for eval_param, target_param in zip(self.actor.parameters(), self.actor_target.parameters()):
            target_param.data.copy_(self.tau * eval_param.data + (1.0 - self.tau) * target_param.data)


if __name__ == "__main__":
    agent = DQN(state_dim=[4], action_dim=2, one_hot=False, double=True, lr=0.0)
    n = 16
    experiences = (torch.randn(n, 4), torch.randint(0, 2, (n, 1)).float(), torch.randn(n, 1),
                   torch.randn(n, 4), torch.zeros(n, 1))

    # semi-gradient reference (what the fix computes: q_target detached)
    ref = copy.deepcopy(agent.actor)
    states, actions, rewards, next_states, dones = experiences
    with torch.no_grad():
        q_idx = agent.actor_target(next_states).argmax(dim=1).unsqueeze(1)
        y_ref = rewards + agent.gamma * ref(next_states).gather(1, q_idx) * (1 - dones)
    nn.MSELoss()(ref(states).gather(1, actions.long()), y_ref).backward()

    y_j = agent.learn(experiences)  # lr=0.0: weights stay equal, only gradients are compared
    assert y_j.requires_grad and y_j.grad_fn is not None
    g_bug = agent.actor.net[0].weight.grad
    g_ref = ref.net[0].weight.grad
    assert not torch.allclose(g_bug, g_ref, atol=1e-6)
    print("evidence holds: TD target has grad_fn; actor grad deviates from the semi-gradient by %.4f"
          % (g_bug - g_ref).abs().max().item())
