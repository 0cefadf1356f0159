# source: placement matrix
# category: DL402
# expect: flag 21
# evidence: the helper returns the network's output (which requires grad) and the caller's `.numpy()` on it raises "Can't call numpy() on Tensor that requires grad".
import torch
from torch import nn


def train_step(m, stepper, batch, label, score_fn):
    stepper.zero_grad()
    logits = m(batch)
    score_fn(logits, label).backward()
    stepper.step()
    return logits


def fit(m, stepper, pairs, score_fn):
    snapshots = []
    for batch, label in pairs:
        out = train_step(m, stepper, batch, label, score_fn)
        snapshots.append(out.numpy())
    return snapshots


if __name__ == "__main__":
    torch.manual_seed(0)
    head = nn.Linear(4, 3)
    momentum_sgd = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    try:
        fit(head, momentum_sgd, pairs, nn.CrossEntropyLoss())
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised
    print("evidence holds: caller's .numpy() on the helper's output raises")
