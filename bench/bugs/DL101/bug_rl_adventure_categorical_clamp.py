# source: https://github.com/higgsfield/RL-Adventure/blob/master/6.categorical%20dqn.ipynb
# category: DL101
# expect: flag 134
# evidence: the clamped atoms of dist still pass gradient (as if no clamp), so the gradients of current_model differ from those of the same loss written with torch.clamp
import math, random
import copy
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.autograd as autograd
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)
random.seed(0)

USE_CUDA = torch.cuda.is_available()
Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)


class ReplayBuffer(object):
    def __init__(self, capacity):
        self.buffer = deque(maxlen=capacity)

    def push(self, state, action, reward, next_state, done):
        state = np.expand_dims(state, 0)
        next_state = np.expand_dims(next_state, 0)
        self.buffer.append((state, action, reward, next_state, done))

    def sample(self, batch_size):
        state, action, reward, next_state, done = zip(*random.sample(self.buffer, batch_size))
        return np.concatenate(state), action, reward, np.concatenate(next_state), done

    def __len__(self):
        return len(self.buffer)


class CategoricalDQN(nn.Module):
    def __init__(self, num_inputs, num_actions, num_atoms, Vmin, Vmax):
        super(CategoricalDQN, self).__init__()
        self.num_inputs = num_inputs
        self.num_actions = num_actions
        self.num_atoms = num_atoms
        self.Vmin = Vmin
        self.Vmax = Vmax

        self.linear1 = nn.Linear(num_inputs, 32)
        self.linear2 = nn.Linear(32, 64)
        self.linear3 = nn.Linear(64, self.num_actions * self.num_atoms)

    def forward(self, x):
        batch_size = x.size(0)
        x = F.relu(self.linear1(x))
        x = F.relu(self.linear2(x))
        x = self.linear3(x)
        x = F.softmax(x.view(-1, self.num_atoms), dim=1).view(-1, self.num_actions, self.num_atoms)
        return x

    def act(self, state):
        state = Variable(torch.FloatTensor(state).unsqueeze(0), volatile=True)
        dist = self.forward(state).data.cpu()
        dist = dist * torch.linspace(self.Vmin, self.Vmax, self.num_atoms)
        action = dist.sum(2).max(1)[1].numpy()[0]
        return action


def projection_distribution(next_state, rewards, dones):
    batch_size = next_state.size(0)

    delta_z = float(Vmax - Vmin) / (num_atoms - 1)
    support = torch.linspace(Vmin, Vmax, num_atoms)

    next_dist = target_model(next_state).data.cpu() * support
    next_action = next_dist.sum(2).max(1)[1]
    next_action = next_action.unsqueeze(1).unsqueeze(1).expand(next_dist.size(0), 1, next_dist.size(2))
    next_dist = next_dist.gather(1, next_action).squeeze(1)

    rewards = rewards.unsqueeze(1).expand_as(next_dist)
    dones = dones.unsqueeze(1).expand_as(next_dist)
    support = support.unsqueeze(0).expand_as(next_dist)

    Tz = rewards + (1 - dones) * 0.99 * support
    Tz = Tz.clamp(min=Vmin, max=Vmax)
    b = (Tz - Vmin) / delta_z
    l = b.floor().long()
    u = b.ceil().long()

    offset = torch.linspace(0, (batch_size - 1) * num_atoms, batch_size).long()\
                    .unsqueeze(1).expand(batch_size, num_atoms)

    proj_dist = torch.zeros(next_dist.size())
    proj_dist.view(-1).index_add_(0, (l + offset).view(-1), (next_dist * (u.float() - b)).view(-1))
    proj_dist.view(-1).index_add_(0, (u + offset).view(-1), (next_dist * (b - l.float())).view(-1))

    return proj_dist


num_atoms = 51
Vmin = -10
Vmax = 10

current_model = CategoricalDQN(4, 2, num_atoms, Vmin, Vmax)
target_model = CategoricalDQN(4, 2, num_atoms, Vmin, Vmax)

optimizer = optim.Adam(current_model.parameters())
replay_buffer = ReplayBuffer(10000)


def update_target(current_model, target_model):
    target_model.load_state_dict(current_model.state_dict())


update_target(current_model, target_model)


def compute_td_loss(batch_size):
    state, action, reward, next_state, done = replay_buffer.sample(batch_size)

    state = Variable(torch.FloatTensor(np.float32(state)))
    with torch.no_grad():
        next_state = Variable(torch.FloatTensor(np.float32(next_state)))
    action = Variable(torch.LongTensor(action))
    reward = torch.FloatTensor(reward)
    done = torch.FloatTensor(np.float32(done))

    proj_dist = projection_distribution(next_state, reward, done)

    dist = current_model(state)
    action = action.unsqueeze(1).unsqueeze(1).expand(batch_size, 1, num_atoms)
    dist = dist.gather(1, action).squeeze(1)
    dist.data.clamp_(0.01, 0.99)
    loss = -(Variable(proj_dist) * dist.log()).sum(1)
    loss = loss.mean()

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

    return loss


if __name__ == "__main__":
    batch_size = 16
    # a trained categorical head is peaked: make the softmax over atoms sharp
    with torch.no_grad():
        current_model.linear3.weight.mul_(20.0)
        current_model.linear3.bias.mul_(20.0)
    update_target(current_model, target_model)

    for _ in range(batch_size):
        s = np.random.randn(4)
        replay_buffer.push(s, random.randrange(2), float(np.random.randn()), s + 0.1, False)

    # reference: the same loss, with a clamp that autograd sees (order of the batch does not matter)
    ref_model = copy.deepcopy(current_model)
    st, ac, rw, nst, dn = zip(*replay_buffer.buffer)
    st = torch.FloatTensor(np.float32(np.concatenate(st)))
    nst = torch.FloatTensor(np.float32(np.concatenate(nst)))
    ac = torch.LongTensor(ac)
    proj = projection_distribution(nst, torch.FloatTensor(rw), torch.FloatTensor(np.float32(dn)))
    ref_dist = ref_model(st).gather(1, ac.unsqueeze(1).unsqueeze(1).expand(batch_size, 1, num_atoms)).squeeze(1)
    n_clamped = int(((ref_dist < 0.01) | (ref_dist > 0.99)).sum().item())
    ref_loss = -(proj * torch.clamp(ref_dist, 0.01, 0.99).log()).sum(1).mean()
    ref_loss.backward()

    loss = compute_td_loss(batch_size)
    g_bug = current_model.linear3.weight.grad
    g_ref = ref_model.linear3.weight.grad
    diff = (g_bug - g_ref).abs().max().item()
    assert n_clamped > 0, n_clamped
    assert abs(loss.item() - ref_loss.item()) < 1e-4
    assert diff > 1e-3, diff
    print("evidence holds: same loss value (%.4f) but %d atoms were clamped behind autograd's back; "
          "linear3 gradient differs from the torch.clamp version by up to %.4f" % (loss.item(), n_clamped, diff))
