"""The probes of DL401 (losses accumulated with their graphs), DL402
(`.numpy()` on a tensor that requires grad) and DL603 (a target network's
output in a loss with autograd on) on the shapes real training code takes:
an epoch tracker whose method adds the losses to its own state, numpy
functions handed a list of tensors, a helper whose callers decide, a DQN
agent whose learning step returns until its replay buffer holds a batch.
Each is confirmed on the user's own code, and a look-alike is refuted or
left unconfirmed.

The session's one verifier worker (tests/conftest.py) serves the file.
"""

from __future__ import annotations


import pytest

from conftest import line_of, verify_findings

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]

# An epoch tracker whose method adds each step's loss tensors to its own state, and
# one that detaches what it keeps in place (the linter flags both).
TRACKERS = '''
import collections

import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self, in_features=16, classes=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, 32), nn.ReLU())
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.body(x))


class LossesTrackEpoch:
    def __init__(self):
        self.train_losses = collections.defaultdict(float)
        self.train_iteration_counts = 0

    def update_train_losses(self, loss):
        for key in loss:
            self.train_losses[key] += loss[key]
        self.train_iteration_counts += 1


class DetachedTrack:
    def __init__(self):
        self.train_losses = collections.defaultdict(float)
        self.train_iteration_counts = 0

    def record(self, loss):
        for key in loss:
            self.train_losses[key] += loss[key]
            self.train_losses[key].detach_()
        self.train_iteration_counts += 1


def train(model: Classifier, optimizer, dset, tracker: LossesTrackEpoch):
    for x, y in dset:
        scores = model(x)
        loss = {"total": F.cross_entropy(scores, y), "l2": scores.pow(2).mean()}
        optimizer.zero_grad()
        loss["total"].backward()
        optimizer.step()
        tracker.update_train_losses(loss)
    return tracker.train_losses["total"] / tracker.train_iteration_counts


def train_detached(model: Classifier, optimizer, dset, tracker: DetachedTrack):
    for x, y in dset:
        scores = model(x)
        loss = {"total": F.cross_entropy(scores, y), "l2": scores.pow(2).mean()}
        optimizer.zero_grad()
        loss["total"].backward()
        optimizer.step()
        tracker.record(loss)
    return tracker.train_losses["total"] / tracker.train_iteration_counts
'''

# numpy functions handed tensors: `np.sum` over a list of embeddings that require
# grad, and a plot of a loss history that a fresh agent has not filled yet.
NUMPY_SHAPES = '''
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class SessionGraph(nn.Module):
    """Item embeddings smoothed over an item graph, averaged over the layers."""

    def __init__(self, n_items=20, dim=8, layers=2):
        super().__init__()
        self.layers = layers
        self.embedding = nn.Embedding(n_items, dim)
        self.register_buffer("adjacency", torch.eye(n_items) * 0.5 + 0.5 / n_items)

    def forward(self, items):
        x = self.embedding.weight
        final = [x]
        for _ in range(self.layers):
            x = self.adjacency @ x
            final.append(x)
        mean = np.sum(final, 0) / (self.layers + 1)
        return torch.as_tensor(mean)[items]


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def heatmap(array):
    if isinstance(array, torch.Tensor):
        array = array.cpu().numpy()
    lo, hi = array.min(), array.max()
    return (array - lo) / (hi - lo + 1e-12)


def show_objectness(model: Detector, img):
    model.eval()
    maps = model(img.unsqueeze(0))
    return [heatmap(m) for m in maps[0]]


class Agent:
    def __init__(self, model: Detector):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        self.cost_his = []

    def learn(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.cost_his.append(loss)

    def plot_cost(self):
        steps, costs = np.arange(len(self.cost_his)), np.asarray(self.cost_his)
        return steps, costs


def predictions(model: Detector, img):
    scores = model(img).sigmoid()
    scores = scores.detach()
    return scores.numpy()
'''

# A conversion helper: whether its tensor requires grad is up to its callers.
HELPERS = '''
import numpy as np
import torch
from torch import nn


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def to_numpy(t):
    return t.cpu().numpy()


def objectness(model: Detector, img):
    return to_numpy(model(img).sigmoid())


def plot_maps(*arrays):
    panels = []
    for array in arrays:
        if isinstance(array, torch.Tensor):
            array = array.cpu().numpy()
        panels.append(array.mean())
    return panels


def visualize(model: Detector, img):
    maps = model(img)
    return plot_maps(*maps[0])
'''

# A DQN agent whose learning step returns until the replay buffer holds a batch.
DQN_AGENT = '''
import random
from collections import deque

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class QNetwork(nn.Module):
    def __init__(self, n_states=4, n_actions=2, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(n_states, hidden)
        self.fc2 = nn.Linear(hidden, n_actions)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class ReplayMemory:
    def __init__(self, capacity=10000):
        self.buffer = deque(maxlen=capacity)

    def push(self, state, action, reward, next_state, done):
        self.buffer.append((state, action, reward, next_state, done))

    def sample(self, batch_size):
        batch = random.sample(self.buffer, batch_size)
        states, actions, rewards, next_states, dones = zip(*batch)
        return (torch.tensor(np.array(states), dtype=torch.float32), torch.tensor(actions),
                torch.tensor(rewards, dtype=torch.float32), torch.tensor(np.array(next_states), dtype=torch.float32),
                torch.tensor(dones, dtype=torch.float32))

    def __len__(self):
        return len(self.buffer)


class DQNAgent:
    def __init__(self, gamma=0.99, batch_size=32, lr=1e-3):
        self.gamma = gamma
        self.batch_size = batch_size
        self.policy_net = QNetwork()
        self.target_net = QNetwork()
        self.target_net.load_state_dict(self.policy_net.state_dict())
        self.optimizer = torch.optim.Adam(self.policy_net.parameters(), lr=lr)
        self.memory = ReplayMemory()

    def optimize(self):
        if len(self.memory) < self.batch_size:
            return None
        states, actions, rewards, next_states, dones = self.memory.sample(self.batch_size)
        q = self.policy_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        next_q = self.target_net(next_states).max(1)[0]
        target = rewards + self.gamma * next_q * (1 - dones)
        loss = F.smooth_l1_loss(q, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()
'''

# The same agent, its target network frozen by a helper the linter does not follow.
FROZEN_TARGET = '''
import random
from collections import deque

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class QNetwork(nn.Module):
    def __init__(self, n_states=4, n_actions=2, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(n_states, hidden)
        self.fc2 = nn.Linear(hidden, n_actions)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class ReplayMemory:
    def __init__(self, capacity=10000):
        self.buffer = deque(maxlen=capacity)

    def push(self, state, action, reward, next_state, done):
        self.buffer.append((state, action, reward, next_state, done))

    def sample(self, batch_size):
        batch = random.sample(self.buffer, batch_size)
        states, actions, rewards, next_states, dones = zip(*batch)
        return (torch.tensor(np.array(states), dtype=torch.float32), torch.tensor(actions),
                torch.tensor(rewards, dtype=torch.float32), torch.tensor(np.array(next_states), dtype=torch.float32),
                torch.tensor(dones, dtype=torch.float32))

    def __len__(self):
        return len(self.buffer)


def freeze(module):
    for parameter in module.parameters():
        parameter.requires_grad_(False)


class DQNAgent:
    def __init__(self, gamma=0.99, batch_size=32, lr=1e-3):
        self.gamma = gamma
        self.batch_size = batch_size
        self.policy_net = QNetwork()
        self.target_net = QNetwork()
        self.target_net.load_state_dict(self.policy_net.state_dict())
        freeze(self.target_net)
        self.optimizer = torch.optim.Adam(self.policy_net.parameters(), lr=lr)
        self.memory = ReplayMemory()

    def optimize(self):
        if len(self.memory) < self.batch_size:
            return None
        states, actions, rewards, next_states, dones = self.memory.sample(self.batch_size)
        q = self.policy_net(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        next_q = self.target_net(next_states).max(1)[0]
        target = rewards + self.gamma * next_q * (1 - dones)
        loss = F.smooth_l1_loss(q, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()
'''

# A training function handed the replay buffer, which `random.sample`s a batch from it.
BUFFER_ARGUMENT = '''
import collections
import random

import torch
import torch.nn.functional as F
from torch import nn

batch_size = 8
gamma = 0.98


class Qnet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 32)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class ReplayBuffer:
    def __init__(self, limit=50000):
        self.buffer = collections.deque(maxlen=limit)

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
        return (torch.tensor(s_lst, dtype=torch.float), torch.tensor(a_lst), torch.tensor(r_lst),
                torch.tensor(s_prime_lst, dtype=torch.float), torch.tensor(done_mask_lst))


def train(q: Qnet, q_target: Qnet, memory: ReplayBuffer, optimizer):
    for _ in range(10):
        s, a, r, s_prime, done_mask = memory.sample(batch_size)
        q_a = q(s).gather(1, a)
        max_q_prime = q_target(s_prime).max(1)[0].unsqueeze(1)
        target = r + gamma * max_q_prime * done_mask
        loss = F.smooth_l1_loss(q_a, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''


# A script that fills its buffer in a loop and then trains; the reproduction of the
# script's call builds the buffer empty, and sampling it fails.
SCRIPT_BUFFER = '''
import collections
import random

import numpy as np
import torch
import torch.nn.functional as F


class ReplayBuffer:
    def __init__(self, capacity):
        self.buffer = collections.deque(maxlen=capacity)

    def add(self, state, action, reward, next_state, done):
        self.buffer.append((state, action, reward, next_state, done))

    def sample(self, batch_size):
        transitions = random.sample(self.buffer, batch_size)
        state, action, reward, next_state, done = zip(*transitions)
        return np.array(state), action, reward, np.array(next_state), done

    def size(self):
        return len(self.buffer)


class Qnet(torch.nn.Module):
    def __init__(self, state_dim, hidden_dim, action_dim):
        super().__init__()
        self.fc1 = torch.nn.Linear(state_dim, hidden_dim)
        self.fc2 = torch.nn.Linear(hidden_dim, action_dim)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class DQN:
    def __init__(self, state_dim, hidden_dim, action_dim, learning_rate, gamma, target_update):
        self.q_net = Qnet(state_dim, hidden_dim, action_dim)
        self.target_q_net = Qnet(state_dim, hidden_dim, action_dim)
        self.optimizer = torch.optim.Adam(self.q_net.parameters(), lr=learning_rate)
        self.gamma = gamma
        self.target_update = target_update
        self.count = 0

    def update(self, transition_dict):
        states = torch.tensor(transition_dict["states"], dtype=torch.float)
        actions = torch.tensor(transition_dict["actions"]).view(-1, 1)
        rewards = torch.tensor(transition_dict["rewards"], dtype=torch.float).view(-1, 1)
        next_states = torch.tensor(transition_dict["next_states"], dtype=torch.float)
        dones = torch.tensor(transition_dict["dones"], dtype=torch.float).view(-1, 1)
        q_values = self.q_net(states).gather(1, actions)
        max_next_q_values = self.target_q_net(next_states).max(1)[0].view(-1, 1)
        q_targets = rewards + self.gamma * max_next_q_values * (1 - dones)
        loss = F.mse_loss(q_values, q_targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        if self.count % self.target_update == 0:
            self.target_q_net.load_state_dict(self.q_net.state_dict())
        self.count += 1


if __name__ == "__main__":
    agent = DQN(state_dim=4, hidden_dim=64, action_dim=2, learning_rate=2e-3, gamma=0.98, target_update=10)
    replay_buffer = ReplayBuffer(10000)
    for _ in range(200):
        replay_buffer.add(np.random.randn(4), np.random.randint(2), 1.0, np.random.randn(4), np.random.rand() < 0.1)
    for _ in range(10):
        b_s, b_a, b_r, b_ns, b_d = replay_buffer.sample(64)
        agent.update({"states": b_s, "actions": b_a, "next_states": b_ns, "rewards": b_r, "dones": b_d})
'''


def test_dl401_confirms_a_tracker_method_that_keeps_the_losses(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "trackers.py", TRACKERS, "DL401")
    verification = verdicts[line_of(TRACKERS, "tracker.update_train_losses(loss)")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    # The attribute the finding names the method adding to, read on the tracker.
    assert verification.evidence.startswith("autograd nodes reachable from `tracker.train_losses` after iterations 1-3: ")
    counts = [int(n) for n in verification.evidence.split(": ")[1].split(", ")]
    assert counts[0] < counts[1] < counts[2]


def test_dl401_refutes_a_tracker_that_detaches_what_it_keeps(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "trackers.py", TRACKERS, "DL401")
    verification = verdicts[line_of(TRACKERS, "tracker.record(loss)")]
    assert (verification.status, verification.basis) == ("refuted", "user-code"), verification.evidence
    assert "`tracker.train_losses` holds no autograd graph (nodes after each iteration: 0, 0, 0)" in verification.evidence


def test_dl402_confirms_np_sum_over_embeddings_that_require_grad(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "numpy_shapes.py", NUMPY_SHAPES, "DL402")
    verification = verdicts[line_of(NUMPY_SHAPES, "np.sum(final, 0)")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "`np.sum(final, 0)` raised RuntimeError: Can't call numpy() on Tensor that requires grad" in verification.evidence


def test_dl402_an_empty_history_converts_no_tensor_and_proves_nothing(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "numpy_shapes.py", NUMPY_SHAPES, "DL402")
    line = line_of(NUMPY_SHAPES, "np.asarray(self.cost_his)")
    verification = verdicts[line]
    assert verification.status == "inconclusive", verification.evidence
    assert verification.evidence == f"line {line} ran with synthesized inputs, but called no `.numpy()` of a tensor"


def test_dl402_a_helper_whose_callers_decide_is_not_refuted(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "helpers.py", HELPERS, "DL402")
    verification = verdicts[line_of(HELPERS, "return t.cpu().numpy()")]
    # Synthesized inputs carry no graph: that alone must not refute a conversion
    # that the file's caller feeds a model output.
    assert verification.status == "inconclusive", verification.evidence
    assert "with the inputs requiring grad its tensor required grad: what the callers pass decides" in verification.evidence


def test_dl603_fills_the_agents_replay_buffer_and_confirms(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "dqn_agent.py", DQN_AGENT, "DL603")
    verification = verdicts[line_of(DQN_AGENT, "next_q = self.target_net(next_states)")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    backward = line_of(DQN_AGENT, "loss.backward()")
    assert (
        f"the output of `self.target_net` (QNetwork) on this line reaches 4 of its 4 parameters, and "
        f"`loss.backward()` (line {backward}) put gradients into 4 of them"
    ) in verification.evidence
    filled = "the replay buffer `self.memory` (ReplayMemory) filled with 64 synthesized transitions through its own `push`"
    assert filled in verification.evidence


def test_dl603_fills_a_buffer_passed_in_and_confirms(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "buffer_argument.py", BUFFER_ARGUMENT, "DL603")
    verification = verdicts[line_of(BUFFER_ARGUMENT, "max_q_prime = q_target(s_prime)")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "the `ReplayBuffer` passed in filled with 64 synthesized transitions through its own `put`" in verification.evidence


def test_dl603_refutes_a_frozen_target_after_filling_the_buffer(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "frozen_target.py", FROZEN_TARGET, "DL603")
    verification = verdicts[line_of(FROZEN_TARGET, "next_q = self.target_net(next_states)")]
    assert (verification.status, verification.basis) == ("refuted", "user-code"), verification.evidence
    assert "carries no graph back to its 4 parameters (requires_grad=False for all of them)" in verification.evidence


def test_dl603_unchanged_gradients_on_made_up_transitions_refute_nothing(verifier, tmp_path):
    # With gamma 0 the target network's gradients are zero: on transitions the
    # probe made up, that cannot rule the finding out.
    source = DQN_AGENT.replace("def __init__(self, gamma=0.99,", "def __init__(self, gamma=0.0,")
    verdicts = verify_findings(verifier, tmp_path, "bandit_agent.py", source, "DL603")
    verification = verdicts[line_of(source, "next_q = self.target_net(next_states)")]
    assert verification.status == "inconclusive", verification.evidence
    assert verification.evidence.endswith("; with synthesized transitions this rules nothing out")


def test_dl603_fills_a_buffer_the_code_builds_when_sampling_it_fails(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "script_buffer.py", SCRIPT_BUFFER, "DL603")
    verification = verdicts[line_of(SCRIPT_BUFFER, "max_next_q_values = self.target_q_net(next_states)")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "the `ReplayBuffer` the code built filled with 64 synthesized transitions through its own `add`" in verification.evidence
