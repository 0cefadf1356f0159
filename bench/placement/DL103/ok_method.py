# source: placement matrix
# category: DL103
# expect: clean
# evidence: Trainer.epoch reads the 0-dim objective with .item(), so the epoch completes and the meter is a plain float.
import torch


class Trainer:
    def __init__(self, body, lr):
        self.body = body
        self.updater = torch.optim.SGD(self.body.parameters(), lr=lr, momentum=0.9)
        self.crit = torch.nn.L1Loss()
        self.meter = 0.0

    def epoch(self, loader):
        for xb, yb in loader:
            self.updater.zero_grad()
            objective = self.crit(self.body(xb), yb)
            objective.backward()
            self.updater.step()
            self.meter += objective.item() * xb.size(0)
        return self.meter


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(torch.nn.Linear(3, 1), lr=0.05)
    loader = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
    try:
        tr.epoch(loader)
        raised = None
    except IndexError as exc:
        raised = exc
    assert raised is None, raised
    assert isinstance(tr.meter, float) and tr.meter > 0.0
    print("evidence holds: .item() read every loss; the meter is a float")
