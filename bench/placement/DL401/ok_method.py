# source: placement matrix
# category: DL401
# expect: clean
# evidence: Trainer.run_epoch adds `penalty.item()` into self.seen_penalty, which stays a Python float holding no graph.
import torch


class Trainer:
    def __init__(self, body, lr):
        self.body = body
        self.updater = torch.optim.RMSprop(self.body.parameters(), lr=lr)
        self.objective = torch.nn.SmoothL1Loss()
        self.seen_penalty = 0.0

    def run_epoch(self, pairs):
        for obs, goal in pairs:
            self.updater.zero_grad()
            penalty = self.objective(self.body(obs), goal)
            penalty.backward()
            self.updater.step()
            self.seen_penalty += penalty.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(torch.nn.Linear(4, 1), lr=0.05)
    pairs = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    tr.run_epoch(pairs)
    acc = tr.seen_penalty
    assert isinstance(acc, float) and acc > 0
    assert all(p.grad is not None for p in tr.body.parameters())
    print("evidence holds: self.seen_penalty is a float, no graph kept")
