# source: placement matrix
# category: DL502
# expect: clean
# evidence: the helper manual_step() edits the parameters in place under torch.no_grad(), so the caller's training steps run and change the weights.
import torch
from torch import nn


def manual_step(tensors, rate):
    with torch.no_grad():
        for t in tensors:
            t -= rate * t.grad


def fit(m, pairs, score_fn, rate):
    for batch, label in pairs:
        m.zero_grad()
        score_fn(m(batch), label).backward()
        manual_step(m.parameters(), rate)


if __name__ == "__main__":
    torch.manual_seed(0)
    head = nn.Linear(4, 3)
    pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    before = [p.detach().clone() for p in head.parameters()]
    try:
        fit(head, pairs, nn.CrossEntropyLoss(), 0.1)
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, head.parameters()))
    print("evidence holds: helper's update under no_grad runs, weights change")
