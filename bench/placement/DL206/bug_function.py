# source: placement matrix
# category: DL206
# expect: flag 18
# evidence: in train() state.detach() is a discarded expression, so state still links to the previous step's freed graph and the second backward raises "Trying to backward through the graph a second time".
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
        state.detach()
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
        train(rnn, lin, sgd, steps)
    except RuntimeError as e:
        caught = str(e)
    assert caught is not None
    assert "Trying to backward through the graph a second time" in caught
    print("evidence holds: the discarded detach() in train() cut nothing; backward raises")
