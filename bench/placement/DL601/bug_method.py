# source: placement matrix
# category: DL601
# expect: flag 18, 19, 21, 22
# evidence: Trainer.fit never zeroes self.updater's gradients; the weights drift away from a zeroed replay.
import copy
import torch

torch.manual_seed(0)


class Trainer:
    def __init__(self, body, data):
        self.body = body
        self.data = data
        self.updater = torch.optim.SGD(self.body.parameters(), lr=0.05, momentum=0.9)

    def fit(self, epochs):
        for _ in range(epochs):
            for xb, yb in self.data:
                objective = ((self.body(xb) - yb) ** 2).mean()
                objective.backward()
                self.updater.step()


if __name__ == "__main__":
    body = torch.nn.Linear(2, 2)
    data = [(torch.randn(3, 2), torch.randn(3, 2)) for _ in range(3)]
    twin = copy.deepcopy(body)
    Trainer(body, data).fit(2)
    tw_opt = torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9)
    for _ in range(2):
        for xb, yb in data:
            tw_opt.zero_grad()
            ((twin(xb) - yb) ** 2).mean().backward()
            tw_opt.step()
    assert not torch.allclose(body.weight.detach(), twin.weight.detach())
    print("evidence holds: un-zeroed gradients made the weights diverge from a zeroed replay")
