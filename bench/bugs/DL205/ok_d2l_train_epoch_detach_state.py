# source: https://github.com/d2l-ai/d2l-en/blob/master/d2l/torch.py
# category: DL205
# expect: clean
# evidence: detach_() on the GRU state tensor and on each LSTM (h, c) tensor cuts the history in place; training runs and every parameter gets a gradient
import math

import torch
from torch import nn
from torch.nn import functional as F


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
    state = None
    total, n = 0.0, 0
    for X, Y in train_iter:
        if state is None or use_random_iter:
            state = net.begin_state(batch_size=X.shape[0], device=device)
        else:
            if isinstance(net, nn.Module) and not isinstance(state, tuple):
                # `state` is a tensor for `nn.GRU`
                state.detach_()
            else:
                # `state` is a tuple of tensors for `nn.LSTM`
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
        total += l.item() * y.numel()
        n += y.numel()
    return math.exp(total / n)


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab_size, num_hiddens, num_steps, batch_size = 7, 8, 5, 2
    corpus = torch.randint(0, vocab_size, (batch_size, 3 * num_steps + 1))
    train_iter = [(corpus[:, i:i + num_steps], corpus[:, i + 1:i + 1 + num_steps]) for i in range(0, 3 * num_steps, num_steps)]
    for rnn_layer in (nn.GRU(vocab_size, num_hiddens), nn.LSTM(vocab_size, num_hiddens)):
        net = RNNModel(rnn_layer, vocab_size)
        updater = torch.optim.SGD(net.parameters(), lr=1.0)
        ppl = train_epoch_ch8(net, train_iter, nn.CrossEntropyLoss(), updater, torch.device('cpu'), use_random_iter=False)
        assert math.isfinite(ppl)
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())
    print("evidence holds: the whole state tensors (not views) are detached in place between batches; training proceeds")
