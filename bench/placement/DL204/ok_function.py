# source: placement matrix
# category: DL204
# expect: clean
# evidence: inside train() the alias is a clone, so scaling it leaves the saved sigmoid output intact; backward runs and every layer gets a gradient.
import torch
import torch.nn as nn


def train(m, sgd, batches):
    readings = []
    for inp, tgt in batches:
        sgd.zero_grad()
        act = torch.sigmoid(m(inp))
        snap = act.detach().clone()
        snap.mul_(100)
        readings.append(snap.mean().item())
        cost = ((act - tgt) ** 2).mean()
        cost.backward()
        sgd.step()
    return readings


if __name__ == "__main__":
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    sgd = torch.optim.SGD(m.parameters(), lr=0.1)
    data = [(torch.randn(5, 3), torch.rand(5, 1)) for _ in range(3)]
    first = m[0].weight.detach().clone()
    caught = None
    try:
        readings = train(m, sgd, data)
    except RuntimeError as e:
        caught = str(e)
    assert caught is None and len(readings) == 3
    assert all(p.grad is not None for p in m.parameters())
    assert not torch.equal(m[0].weight.detach(), first)
    print("evidence holds: the cloned alias is scaled safely; train() updates every layer")
