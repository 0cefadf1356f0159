# source: placement matrix
# category: DL204
# expect: flag 15
# evidence: inside train() the detached alias is scaled in place, which edits the saved sigmoid output, so backward raises "one of the variables needed for gradient computation has been modified by an inplace operation".
import torch
import torch.nn as nn


def train(m, sgd, batches):
    readings = []
    for inp, tgt in batches:
        sgd.zero_grad()
        act = torch.sigmoid(m(inp))
        snap = act.detach()
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
        train(m, sgd, data)
    except RuntimeError as e:
        caught = str(e)
    assert caught is not None and "modified by an inplace operation" in caught
    assert torch.equal(m[0].weight.detach(), first)
    print("evidence holds: scaling the detached alias in place breaks backward in train()")
