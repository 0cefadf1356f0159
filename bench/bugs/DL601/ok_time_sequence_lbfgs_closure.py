# source: https://github.com/pytorch/examples/blob/main/time_sequence_prediction/train.py
# category: DL601
# expect: clean
# evidence: the closure zeroes gradients before each backward, so every LBFGS evaluation sees only its own gradient and the loss falls
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.optimizer import register_optimizer_step_pre_hook


class Sequence(nn.Module):
    def __init__(self, hidden=8):
        super(Sequence, self).__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def generate_sine(n=6, length=16, T=20):
    x = np.empty((n, length), 'int64')
    x[:] = np.array(range(length)) + np.random.randint(-4 * T, 4 * T, n).reshape(n, 1)
    return np.sin(x / 1.0 / T).astype('float64')


def main(opt, data):
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    history = []
    for i in range(opt.steps):
        print('STEP: ', i)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss:', loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 5
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            history.append(loss.item())
    return seq, history


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2)
    opt = parser.parse_args([])
    np.random.seed(0)
    torch.manual_seed(0)
    data = generate_sine()

    buffer_when_grad_arrives = []
    installed = []

    def install(optimizer, args, kwargs):
        if not installed:  # before the first closure runs: watch the first LSTM weight
            w = optimizer.param_groups[0]["params"][0]
            installed.append(w.register_hook(
                lambda g: buffer_when_grad_arrives.append(None if w.grad is None else w.grad.clone())))

    handle = register_optimizer_step_pre_hook(install)
    seq, history = main(opt, data)
    handle.remove()

    assert len(buffer_when_grad_arrives) > opt.steps  # LBFGS evaluates the closure several times per step
    assert all(b is None or torch.count_nonzero(b) == 0 for b in buffer_when_grad_arrives)
    assert history[-1] < history[0]
    print("evidence holds: every closure evaluation starts from zeroed gradients; test loss {:.4f} -> {:.4f}".format(
        history[0], history[-1]))
