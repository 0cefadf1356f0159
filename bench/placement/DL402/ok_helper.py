# source: placement matrix
# category: DL402
# expect: clean
# evidence: the caller converts the helper's output with `.detach().cpu().numpy()` and gets one array per step.
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
        snapshots.append(out.detach().cpu().numpy())
    return snapshots


if __name__ == "__main__":
    torch.manual_seed(0)
    head = nn.Linear(4, 3)
    momentum_sgd = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    try:
        snaps = fit(head, momentum_sgd, pairs, nn.CrossEntropyLoss())
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert len(snaps) == len(pairs) and snaps[0].shape == (8, 3)
    print("evidence holds: .detach().cpu().numpy() on the helper's output converts without error")
