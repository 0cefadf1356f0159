# source: placement matrix
# category: DL303
# expect: clean
# evidence: the helper forward_pass() calls the network with grad enabled, so the caller's backward reaches every parameter and its step changes the weights.
import torch
from torch import nn


def forward_pass(m, batch):
    return m(batch)


def fit(m, stepper, pairs, score_fn):
    for batch, label in pairs:
        stepper.zero_grad()
        logits = forward_pass(m, batch)
        value = score_fn(logits, label)
        value.backward()
        stepper.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    head = nn.Linear(4, 3)
    momentum_sgd = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    before = [p.detach().clone() for p in head.parameters()]
    try:
        fit(head, momentum_sgd, pairs, nn.CrossEntropyLoss())
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert all(p.grad is not None for p in head.parameters())
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, head.parameters()))
    print("evidence holds: helper forward with grad -> gradients reach parameters, weights change")
