# source: placement matrix
# category: DL503
# expect: clean
# evidence: with retain_grad() the Explainer's attribution returns the embedding gradient.
import torch
import torch.nn as nn

torch.manual_seed(0)


class Explainer:
    def __init__(self):
        self.encoder = nn.Embedding(10, 4)
        self.scorer = nn.Linear(4, 1)

    def attribute(self, tokens):
        emb = self.encoder(tokens)
        emb.retain_grad()
        self.scorer(emb).sum().backward()
        return emb.grad


if __name__ == "__main__":
    ex = Explainer()
    attr = ex.attribute(torch.tensor([1, 3, 5]))
    assert attr is not None and attr.shape == (3, 4)
    assert ex.encoder.weight.grad is not None
    print("evidence holds: the embedding output's gradient is available")
