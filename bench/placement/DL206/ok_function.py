# source: placement matrix
# category: DL206
# expect: clean
# evidence: in train() state = state.detach() rebinds the hidden state to a cut copy, so every step backpropagates through its own graph and all four steps run.
import torch
import torch.nn as nn


def train(rnn, lin, sgd, steps):
    state = torch.zeros(2, 4)
    count = 0
    for inp, tgt in steps:
        state = rnn(inp, state)
        cost = ((lin(state) - tgt) ** 2).mean()
        sgd.zero_grad()
        cost.backward()
        sgd.step()
        state = state.detach()
        count += 1
    return count


if __name__ == "__main__":
    torch.manual_seed(0)
    rnn = nn.RNNCell(3, 4)
    lin = nn.Linear(4, 1)
    sgd = torch.optim.SGD([*rnn.parameters(), *lin.parameters()], lr=0.1)
    steps = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)]
    caught = None
    try:
        count = train(rnn, lin, sgd, steps)
    except RuntimeError as e:
        caught = str(e)
    assert caught is None and count == 4
    assert rnn.weight_hh.grad is not None
    print("evidence holds: with state = state.detach() train() runs every step")
