# source: placement matrix
# category: DL401
# expect: clean
# evidence: `stats["loss"] = stats.get("loss", 0) + loss.item()` stores a Python float, so no graph is kept.
import torch


class Trainer:
    def __init__(self, model, lr):
        self.model = model
        self.opt = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.crit = torch.nn.MSELoss()
        self.stats = {}

    def train_epoch(self, loader):
        for x, y in loader:
            self.opt.zero_grad()
            loss = self.crit(self.model(x), y)
            loss.backward()
            self.opt.step()
            self.stats["loss"] = self.stats.get("loss", 0) + loss.item()
        return self.stats


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(torch.nn.Linear(3, 1), lr=0.01)
    loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
    acc = tr.train_epoch(loader)["loss"]
    assert isinstance(acc, float) and acc > 0
    print("evidence holds: stats['loss'] is a float, no graph kept")
