# source: placement matrix
# category: DL402
# expect: clean
# evidence: train() converts the model output with `.detach().cpu().numpy()` and returns one accuracy per step.
import torch
import torch.nn as nn


def train(f, opt, batches, crit):
    hits = []
    for inputs, labels in batches:
        opt.zero_grad()
        scores = f(inputs)
        cost = crit(scores, labels)
        cost.backward()
        opt.step()
        chosen = scores.detach().cpu().numpy().argmax(axis=1)
        hits.append(float((chosen == labels.numpy()).mean()))
    return hits


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
    opt = torch.optim.Adam(f.parameters(), lr=0.01)
    data = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    try:
        hits = train(f, opt, data, nn.CrossEntropyLoss())
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert len(hits) == len(data) and all(0.0 <= h <= 1.0 for h in hits)
    print("evidence holds: .detach().cpu().numpy() converts without error")
