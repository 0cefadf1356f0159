# source: https://github.com/PacktPublishing/Deep-Reinforcement-Learning-Hands-On/issues/29
# category: DL201
# expect: clean
# evidence: calc_loss detaches only the bootstrapped next_state_values (from tgt_net); after the training loop every weight of net has a gradient and has moved, while tgt_net only changes through sync().
"""
Chapter07 03_dqn_double.py: calc_loss(batch, net, tgt_net, gamma, device, double) and the training
loop, with ptan's TargetNet/ExperienceBuffer replaced by small stand-ins and a vector-observation DQN.
"""
import collections
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

Experience = collections.namedtuple('Experience', field_names=['state', 'action', 'reward', 'done', 'new_state'])


class DQN(nn.Module):
    def __init__(self, input_shape, n_actions):
        super(DQN, self).__init__()
        self.fc = nn.Sequential(nn.Linear(input_shape, 32), nn.ReLU(), nn.Linear(32, n_actions))

    def forward(self, x):
        return self.fc(x)


class TargetNet:
    def __init__(self, model):
        self.model = model
        self.target_model = copy.deepcopy(model)

    def sync(self):
        self.target_model.load_state_dict(self.model.state_dict())


class ExperienceBuffer:
    def __init__(self, capacity):
        self.buffer = collections.deque(maxlen=capacity)

    def append(self, experience):
        self.buffer.append(experience)

    def sample(self, batch_size):
        indices = np.random.choice(len(self.buffer), batch_size, replace=False)
        return [self.buffer[idx] for idx in indices]


def unpack_batch(batch):
    states, actions, rewards, dones, last_states = [], [], [], [], []
    for exp in batch:
        states.append(np.array(exp.state, copy=False))
        actions.append(exp.action)
        rewards.append(exp.reward)
        dones.append(exp.done)
        last_states.append(np.array(exp.new_state, copy=False))
    return (np.array(states, dtype=np.float32), np.array(actions), np.array(rewards, dtype=np.float32),
            np.array(dones, dtype=np.uint8), np.array(last_states, dtype=np.float32))


def calc_loss(batch, net, tgt_net, gamma, device="cpu", double=True):
    states, actions, rewards, dones, next_states = unpack_batch(batch)
    states_v = torch.tensor(states).to(device)
    next_states_v = torch.tensor(next_states).to(device)
    actions_v = torch.tensor(actions).to(device)
    rewards_v = torch.tensor(rewards).to(device)
    done_mask = torch.BoolTensor(dones.astype(bool)).to(device)

    state_action_values = net(states_v).gather(1, actions_v.unsqueeze(-1)).squeeze(-1)
    if double:
        next_state_actions = net(next_states_v).max(1)[1]
        next_state_values = tgt_net(next_states_v).gather(1, next_state_actions.unsqueeze(-1)).squeeze(-1)
    else:
        next_state_values = tgt_net(next_states_v).max(1)[0]
    next_state_values[done_mask] = 0.0

    expected_state_action_values = next_state_values.detach() * gamma + rewards_v
    return nn.MSELoss()(state_action_values, expected_state_action_values)


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    params = {'batch_size': 8, 'gamma': 0.99, 'target_net_sync': 10, 'learning_rate': 1e-3}
    device = torch.device("cpu")
    net = DQN(4, 2).to(device)
    tgt_net = TargetNet(net)
    buffer = ExperienceBuffer(100)
    optimizer = optim.Adam(net.parameters(), lr=params['learning_rate'])
    for _ in range(50):
        buffer.append(Experience(np.random.randn(4), np.random.randint(2), float(np.random.randn()),
                                 bool(np.random.rand() < 0.1), np.random.randn(4)))

    net_before = [p.detach().clone() for p in net.parameters()]
    tgt_before = [p.detach().clone() for p in tgt_net.target_model.parameters()]
    for frame_idx in range(1, 10):
        optimizer.zero_grad()
        batch = buffer.sample(params['batch_size'])
        loss_v = calc_loss(batch, net, tgt_net.target_model, gamma=params['gamma'], device=device, double=True)
        loss_v.backward()
        optimizer.step()
        if frame_idx % params['target_net_sync'] == 0:
            tgt_net.sync()

    assert all(p.grad is not None and p.grad.abs().sum().item() > 0 for p in net.parameters())
    assert all(p.grad is None for p in tgt_net.target_model.parameters())
    with torch.no_grad():
        assert all(not torch.equal(a, p) for a, p in zip(net_before, net.parameters()))
        assert all(torch.equal(a, p) for a, p in zip(tgt_before, tgt_net.target_model.parameters()))
    tgt_net.sync()
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(net.parameters(), tgt_net.target_model.parameters()))
    print("evidence holds: net trains through state_action_values; only the target branch is detached")
