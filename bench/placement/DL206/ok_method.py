# source: placement matrix
# category: DL206
# expect: clean
# evidence: Agent.observe rebinds self.mem to its detached copy, so each call backpropagates through its own graph only and all four updates run.
import torch


class Agent:
    def __init__(self):
        self.core = torch.nn.RNNCell(3, 4)
        self.head = torch.nn.Linear(4, 1)
        params = list(self.core.parameters()) + list(self.head.parameters())
        self.updater = torch.optim.Adam(params, lr=0.01)
        self.mem = torch.zeros(2, 4)

    def observe(self, obs, ret):
        self.mem = self.core(obs, self.mem)
        objective = ((self.head(self.mem) - ret) ** 2).mean()
        self.updater.zero_grad()
        objective.backward()
        self.updater.step()
        self.mem = self.mem.detach()


if __name__ == "__main__":
    torch.manual_seed(0)
    ag = Agent()
    done = 0
    caught = None
    try:
        for _ in range(4):
            ag.observe(torch.randn(2, 3), torch.randn(2, 1))
            done += 1
    except RuntimeError as e:
        caught = str(e)
    assert done == 4 and caught is None
    assert ag.mem.grad_fn is None and ag.core.weight_hh.grad is not None
    print("evidence holds: with self.mem = self.mem.detach() every update runs")
