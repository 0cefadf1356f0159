# source: https://github.com/d2l-ai/d2l-zh/blob/master/d2l/torch.py
# category: DL206
# expect: clean
# evidence: state.detach_() / s.detach_() cut the carried state in place, so sequential minibatches train with truncated BPTT and no second-backward error
import math

import torch
from torch import nn
from torch.nn import functional as F


class Accumulator:
    """For accumulating sums over n variables."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


class RNNModel(nn.Module):
    """The RNN model."""

    def __init__(self, rnn_layer, vocab_size, **kwargs):
        super(RNNModel, self).__init__(**kwargs)
        self.rnn = rnn_layer
        self.vocab_size = vocab_size
        self.num_hiddens = self.rnn.hidden_size
        self.linear = nn.Linear(self.num_hiddens, self.vocab_size)

    def forward(self, inputs, state):
        X = F.one_hot(inputs.T.long(), self.vocab_size)
        X = X.to(torch.float32)
        Y, state = self.rnn(X, state)
        output = self.linear(Y.reshape((-1, Y.shape[-1])))
        return output, state

    def begin_state(self, device, batch_size=1):
        if not isinstance(self.rnn, nn.LSTM):
            return torch.zeros((self.rnn.num_layers, batch_size, self.num_hiddens), device=device)
        return (torch.zeros((self.rnn.num_layers, batch_size, self.num_hiddens), device=device),
                torch.zeros((self.rnn.num_layers, batch_size, self.num_hiddens), device=device))


def grad_clipping(net, theta):
    params = [p for p in net.parameters() if p.requires_grad]
    norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
    if norm > theta:
        for param in params:
            param.grad[:] *= theta / norm


def train_epoch_ch8(net, train_iter, loss, updater, device, use_random_iter):
    """Train a net within one epoch (defined in Chapter 8)."""
    state = None
    metric = Accumulator(2)  # Sum of training loss, no. of tokens
    for X, Y in train_iter:
        if state is None or use_random_iter:
            # Initialize `state` when either it is the first iteration or using random sampling
            state = net.begin_state(batch_size=X.shape[0], device=device)
        else:
            if isinstance(net, nn.Module) and not isinstance(state, tuple):
                # `state` is a tensor for `nn.GRU`
                state.detach_()
            else:
                # `state` is a tuple of tensors for `nn.LSTM` and for our custom scratch implementation
                for s in state:
                    s.detach_()
        y = Y.T.reshape(-1)
        X, y = X.to(device), y.to(device)
        y_hat, state = net(X, state)
        l = loss(y_hat, y.long()).mean()
        updater.zero_grad()
        l.backward()
        grad_clipping(net, 1)
        updater.step()
        metric.add(l.detach() * y.numel(), y.numel())
    return math.exp(metric[0] / metric[1])


def seq_data_iter_sequential(corpus, batch_size, num_steps):
    num_tokens = ((len(corpus) - 1) // batch_size) * batch_size
    Xs = torch.tensor(corpus[:num_tokens]).reshape(batch_size, -1)
    Ys = torch.tensor(corpus[1:num_tokens + 1]).reshape(batch_size, -1)
    for i in range(0, (Xs.shape[1] // num_steps) * num_steps, num_steps):
        yield Xs[:, i:i + num_steps], Ys[:, i:i + num_steps]


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab_size = 12
    corpus = [i % vocab_size for i in range(400)]
    device = torch.device("cpu")
    for layer in (nn.GRU(vocab_size, 16), nn.LSTM(vocab_size, 16)):
        net = RNNModel(layer, vocab_size)
        updater = torch.optim.SGD(net.parameters(), lr=1.0)
        ppls = [train_epoch_ch8(net, seq_data_iter_sequential(corpus, 4, 8), nn.CrossEntropyLoss(), updater,
                                device, use_random_iter=False) for _ in range(4)]
        assert ppls[-1] < ppls[0], ppls
    print("evidence holds: GRU and LSTM train across consecutive minibatches; perplexity falls epoch over epoch")
