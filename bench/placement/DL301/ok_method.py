# source: placement matrix
# category: DL301
# expect: clean
# evidence: Evaluator.score switches self.body to eval mode and loops over self.batches under torch.no_grad(), so no collected output carries a grad_fn.
import torch


class Evaluator:
    def __init__(self, batches):
        self.body = torch.nn.Sequential(
            torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)
        )
        self.batches = batches
        self.kept = []

    def score(self):
        self.body.eval()
        with torch.no_grad():
            for obs in self.batches:
                self.kept.append(self.body(obs))
        return len(self.kept)


if __name__ == "__main__":
    torch.manual_seed(0)
    ev = Evaluator([torch.randn(4, 3) for _ in range(5)])
    n = ev.score()
    assert n == 5
    assert all(not k.requires_grad and k.grad_fn is None for k in ev.kept)
    print("evidence holds: Evaluator.score keeps 5 outputs without autograd graphs")
