# source: placement matrix
# category: DL103
# expect: flag 21
# evidence: Trainer.epoch reads the 0-dim objective through .data[0], which raises IndexError "invalid index of a 0-dim tensor" on the first batch.
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
            self.meter += objective.data[0] * xb.size(0)
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
    assert raised is not None and "invalid index of a 0-dim tensor" in str(raised), raised
    print("evidence holds: .data[0] on the 0-dim loss raised IndexError")
