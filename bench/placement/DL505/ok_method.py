# source: placement matrix
# category: DL505
# expect: clean
# evidence: Agent.update computes the loss with torch ops; self.body gets gradients and changes.
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


class Agent:
    def __init__(self):
        self.body = nn.Linear(4, 2)
        self.updater = torch.optim.Adam(self.body.parameters(), lr=1e-2)

    def update(self, obs, returns):
        values = self.body(obs)
        objective = (values - returns).abs().mean()
        self.updater.zero_grad()
        objective.backward()
        self.updater.step()


if __name__ == "__main__":
    ag = Agent()
    before = ag.body.weight.detach().clone()
    for _ in range(3):
        ag.update(torch.randn(6, 4), torch.randn(6, 2))
    assert ag.body.weight.grad is not None
    assert not torch.equal(ag.body.weight.detach(), before)
    assert np.isfinite(ag.body.weight.detach().numpy()).all()
    print("evidence holds: self.body got gradients and changed")
