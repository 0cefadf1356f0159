# source: placement matrix
# category: DL504
# expect: flag 18
# evidence: Trainer.step raises "you can only change requires_grad flags of leaf variables" on self.encoder's output.
import torch

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.encoder = torch.nn.Linear(6, 4)
        self.classifier = torch.nn.Linear(4, 3)
        self.updater = torch.optim.Adam(self.classifier.parameters(), lr=1e-2)

    def step(self, inputs, labels):
        code = self.encoder(inputs)
        code.requires_grad = False
        objective = torch.nn.functional.cross_entropy(self.classifier(code), labels)
        self.updater.zero_grad()
        objective.backward()
        self.updater.step()


if __name__ == "__main__":
    tr = Trainer()
    try:
        tr.step(torch.randn(5, 6), torch.randint(0, 3, (5,)))
        msg = ""
    except RuntimeError as e:
        msg = str(e)
    assert "you can only change requires_grad flags of leaf variables" in msg
    print("evidence holds: Trainer.step raised on requires_grad = False of a non-leaf")
