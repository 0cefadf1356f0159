# source: placement matrix
# category: DL103
# expect: flag 26
# evidence: train() reads the 0-dim cost through .data[0], which raises IndexError "invalid index of a 0-dim tensor" on the first step.
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 5)
        self.b = nn.Linear(5, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def train(m, adam, batches):
    history = []
    for inp, lab in batches:
        adam.zero_grad()
        cost = nn.functional.cross_entropy(m(inp), lab)
        cost.backward()
        adam.step()
        history.append(cost.data[0])
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    m = Net()
    data = [(torch.randn(8, 3), torch.randint(0, 2, (8,))) for _ in range(3)]
    try:
        history = train(m, torch.optim.Adam(m.parameters(), lr=0.01), data)
        raised = None
    except IndexError as exc:
        raised = exc
    assert raised is not None and "invalid index of a 0-dim tensor" in str(raised), raised
    print("evidence holds: .data[0] on the 0-dim loss raised IndexError")
