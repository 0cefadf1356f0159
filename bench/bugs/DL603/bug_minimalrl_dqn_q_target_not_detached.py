# source: https://github.com/seungeunrho/minimalRL/pull/41
# category: DL603
# expect: flag 62, 63, 64
# evidence: each of train()'s inner updates back-propagates smooth_l1_loss into q_target; its .grad is never cleared and ends up as the sum of all of them
import collections
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

# Hyperparameters
learning_rate = 0.0005
gamma = 0.98
buffer_limit = 50000
batch_size = 8


class ReplayBuffer():
    def __init__(self):
        self.buffer = collections.deque(maxlen=buffer_limit)

    def put(self, transition):
        self.buffer.append(transition)

    def sample(self, n):
        mini_batch = random.sample(self.buffer, n)
        s_lst, a_lst, r_lst, s_prime_lst, done_mask_lst = [], [], [], [], []
        for s, a, r, s_prime, done_mask in mini_batch:
            s_lst.append(s)
            a_lst.append([a])
            r_lst.append([r])
            s_prime_lst.append(s_prime)
            done_mask_lst.append([done_mask])
        return torch.tensor(s_lst, dtype=torch.float), torch.tensor(a_lst), \
            torch.tensor(r_lst), torch.tensor(s_prime_lst, dtype=torch.float), \
            torch.tensor(done_mask_lst)

    def size(self):
        return len(self.buffer)


class Qnet(nn.Module):
    def __init__(self):
        super(Qnet, self).__init__()
        self.fc1 = nn.Linear(4, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 2)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def train(q, q_target, memory, optimizer):
    for i in range(10):
        s, a, r, s_prime, done_mask = memory.sample(batch_size)
        q_out = q(s)
        q_a = q_out.gather(1, a)
        max_q_prime = q_target(s_prime).max(1)[0].unsqueeze(1)
        target = r + gamma * max_q_prime * done_mask
        loss = F.smooth_l1_loss(q_a, target)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(transitions):
    q = Qnet()
    q_target = Qnet()
    q_target.load_state_dict(q.state_dict())
    memory = ReplayBuffer()
    optimizer = optim.Adam(q.parameters(), lr=learning_rate)
    for transition in transitions:
        memory.put(transition)
    train(q, q_target, memory, optimizer)
    return q, q_target


if __name__ == "__main__":
    random.seed(0)
    torch.manual_seed(0)
    transitions = [([random.gauss(0, 1) for _ in range(4)], random.randint(0, 1), 0.01,
                    [random.gauss(0, 1) for _ in range(4)], 0.0 if k % 9 == 8 else 1.0) for k in range(40)]

    q = Qnet()
    q_target = Qnet()
    q_target.load_state_dict(q.state_dict())
    memory = ReplayBuffer()
    for transition in transitions:
        memory.put(transition)
    optimizer = optim.Adam(q.parameters(), lr=learning_rate)

    w = q_target.fc3.weight
    fresh = []
    w.register_hook(lambda g: fresh.append(g.detach().clone()))
    train(q, q_target, memory, optimizer)

    assert len(fresh) == 10  # every inner update differentiated the target network
    assert torch.allclose(w.grad, torch.stack(fresh).sum(0), atol=1e-6)  # and its .grad keeps them all
    assert all(p.grad is not None for p in q_target.parameters())
    print("evidence holds: the TD target is not detached; q_target collects the gradient of every update")
