# source: placement matrix
# category: DL505
# expect: flag 21
# evidence: Agent.update forces requires_grad on a numpy-built loss; self.body never receives a gradient.
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
        gap = np.abs(values.detach().numpy() - returns.numpy()).mean()
        objective = torch.tensor(gap)
        objective.requires_grad = True
        self.updater.zero_grad()
        objective.backward()
        self.updater.step()


if __name__ == "__main__":
    ag = Agent()
    before = ag.body.weight.detach().clone()
    for _ in range(3):
        ag.update(torch.randn(6, 4), torch.randn(6, 2))
    assert ag.body.weight.grad is None
    assert torch.equal(ag.body.weight.detach(), before)
    print("evidence holds: three updates ran and self.body never changed")
