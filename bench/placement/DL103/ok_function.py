# source: placement matrix
# category: DL103
# expect: clean
# evidence: train() reads the 0-dim cost with .item(), so it runs all steps and returns plain floats.
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
        history.append(cost.item())
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
    assert raised is None, raised
    assert len(history) == 3 and all(isinstance(v, float) for v in history)
    print("evidence holds: .item() read every loss as a float")
