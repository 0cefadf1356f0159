# source: https://androidkt.com/one-of-the-variables-needed-for-gradient-computation-has-been-modified-by-an-inplace-operation/
# category: DL204
# expect: flag 21, 22, 24
# evidence: writing c[0] = 2.0 into out.detach() also writes out[0]; out.sum().backward() raises "modified by an inplace operation" because exp() saved out for backward
import torch
from torch import nn


class ExpScorer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, 1)

    def forward(self, x):
        # exp() keeps its output for backward: d exp(z)/dz = exp(z)
        return self.proj(x).squeeze(-1).exp()


def train_step(model, optimizer, x):
    out = model(x)
    c = out.detach()  # a "copy" to tweak without touching autograd
    c[0] = 2.0  # shares storage: out[0] is now 2.0 too
    optimizer.zero_grad()
    out.sum().backward()
    optimizer.step()
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ExpScorer(4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(3, 4)
    before = model.proj.weight.detach().clone()
    try:
        train_step(model, optimizer, x)
    except RuntimeError as err:
        message = str(err)
        assert "one of the variables needed for gradient computation has been modified by an inplace operation" in message
        assert "output 0 of Exp" in message  # the saved exp() result
    else:
        raise AssertionError("backward should fail after the write through out.detach()")
    assert torch.equal(model.proj.weight.detach(), before)  # the step never happened
    print("evidence holds: c[0] = 2.0 on out.detach() rewrote the exp output saved for backward, and backward raised the in-place error")
