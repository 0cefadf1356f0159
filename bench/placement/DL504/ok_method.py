# source: placement matrix
# category: DL504
# expect: clean
# evidence: Trainer.step detaches self.encoder's output; the classifier trains and the encoder gets no gradient.
import torch

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.encoder = torch.nn.Linear(6, 4)
        self.classifier = torch.nn.Linear(4, 3)
        self.updater = torch.optim.Adam(self.classifier.parameters(), lr=1e-2)

    def step(self, inputs, labels):
        code = self.encoder(inputs)
        code = code.detach()
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
    assert msg == ""
    assert tr.classifier.weight.grad is not None and tr.encoder.weight.grad is None
    print("evidence holds: the classifier trained and the encoder got no gradient")
