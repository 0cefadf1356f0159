# source: placement matrix
# category: DL701
# expect: flag 14
# evidence: train() wraps the encoder output in Variable, which detaches it; the encoder gets no gradient.
import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)


def train(f, g, sgd, batches):
    for inp, tgt in batches:
        code = Variable(f(inp))
        out = g(code)
        cost = nn.functional.cross_entropy(out, tgt)
        sgd.zero_grad()
        cost.backward()
        sgd.step()


if __name__ == "__main__":
    f = nn.Sequential(nn.Linear(3, 5), nn.Tanh())
    g = nn.Linear(5, 2)
    sgd = torch.optim.Adam(list(f.parameters()) + list(g.parameters()), lr=1e-2)
    batches = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(3)]
    start = f[0].weight.detach().clone()
    train(f, g, sgd, batches)
    assert f[0].weight.grad is None and g.weight.grad is not None
    assert torch.equal(f[0].weight.detach(), start)
    print("evidence holds: the encoder never received a gradient and never moved")
