# source: https://github.com/pytorch/tutorials/blob/00acd8d218741d93c500119ed9e6e777b8d35b99/intermediate_source/reinforcement_q_learning.py
# category: DL101
# expect: clean
# evidence: after optimize_model() every gradient of policy_net lies in [-1, 1] (some were larger before clipping) and the policy weights change
import random
from collections import namedtuple

import torch
import torch.nn as nn
import torch.optim as optim

Transition = namedtuple('Transition', ('state', 'action', 'next_state', 'reward'))
BATCH_SIZE = 8
GAMMA = 0.999


class ReplayMemory(object):
    def __init__(self, capacity):
        self.capacity = capacity
        self.memory = []

    def push(self, *args):
        if len(self.memory) < self.capacity:
            self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self):
        super(DQN, self).__init__()
        self.head = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        return self.head(x)


policy_net = DQN()
target_net = DQN()
target_net.load_state_dict(policy_net.state_dict())
target_net.eval()
optimizer = optim.RMSprop(policy_net.parameters())
memory = ReplayMemory(100)


def optimize_model():
    if len(memory) < BATCH_SIZE:
        return
    transitions = memory.sample(BATCH_SIZE)
    batch = Transition(*zip(*transitions))

    non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)), dtype=torch.bool)
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)

    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE)
    next_state_values[non_final_mask] = target_net(non_final_next_states).max(1)[0].detach()
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch

    # Compute Huber loss
    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))

    # Optimize the model
    optimizer.zero_grad()
    loss.backward()
    for param in policy_net.parameters():
        param.grad.data.clamp_(-1, 1)
    optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    for _ in range(20):
        state = torch.randn(1, 4) * 5
        nxt = None if random.random() < 0.2 else torch.randn(1, 4) * 5
        memory.push(state, torch.tensor([[random.randrange(2)]]), nxt, torch.tensor([50.0]))
    raw = []
    for p in policy_net.parameters():
        p.register_hook(lambda g: raw.append(g.abs().max().item()))
    before = [p.detach().clone() for p in policy_net.parameters()]
    optimize_model()
    largest_raw_grad = max(raw)
    assert largest_raw_grad > 1.0, largest_raw_grad
    assert all(p.grad.abs().max().item() <= 1.0 for p in policy_net.parameters())
    assert all(not torch.equal(b, p) for b, p in zip(before, policy_net.parameters()))
    print("evidence holds: gradients were clipped into [-1, 1] (largest raw %.2f) and the policy network stepped" % largest_raw_grad)
