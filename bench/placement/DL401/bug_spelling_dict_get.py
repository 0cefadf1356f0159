# source: placement matrix
# category: DL401
# expect: flag 21
# evidence: `stats["loss"] = stats.get("loss", 0) + loss` stores a tensor that requires grad and reaches one AddmmBackward0 per step.
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
            self.stats["loss"] = self.stats.get("loss", 0) + loss
        return self.stats


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(torch.nn.Linear(3, 1), lr=0.01)
    loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
    acc = tr.train_epoch(loader)["loss"]
    assert acc.requires_grad and acc.grad_fn is not None
    seen, stack = set(), [acc.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(nxt for nxt, _ in node.next_functions)
    alive = sum(type(n).__name__ == "AddmmBackward0" for n in seen)
    assert alive == len(loader), alive
    print("evidence holds: stats['loss'] requires grad and keeps all", alive, "step graphs alive")
