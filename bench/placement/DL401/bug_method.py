# source: placement matrix
# category: DL401
# expect: flag 21
# evidence: Trainer.run_epoch adds each step's loss tensor into self.seen_penalty, which then requires grad and holds one AddmmBackward0 per step.
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
            self.seen_penalty += penalty


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(torch.nn.Linear(4, 1), lr=0.05)
    pairs = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    tr.run_epoch(pairs)
    acc = tr.seen_penalty
    assert acc.requires_grad and acc.grad_fn is not None
    seen, stack = set(), [acc.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(nxt for nxt, _ in node.next_functions)
    alive = sum(type(n).__name__ == "AddmmBackward0" for n in seen)
    assert alive == len(pairs), alive
    print("evidence holds: self.seen_penalty requires grad and keeps all", alive, "step graphs alive")
