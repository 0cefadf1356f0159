# source: placement matrix
# category: DL601
# expect: clean
# evidence: the helper zeroes gradients before backward; the weights match a zeroed replay.
import copy
import torch
from torch import nn

torch.manual_seed(0)


def sgd_step(m, opt, x, y):
    l = nn.functional.l1_loss(m(x), y)
    opt.zero_grad()
    l.backward()
    opt.step()
    return l.item()


def run(m, opt, batches):
    history = []
    for x, y in batches:
        history.append(sgd_step(m, opt, x, y))
    return history


if __name__ == "__main__":
    m = nn.Linear(3, 1)
    batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
    twin = copy.deepcopy(m)
    run(m, torch.optim.SGD(m.parameters(), lr=0.05), batches)
    t_opt = torch.optim.SGD(twin.parameters(), lr=0.05)
    for x, y in batches:
        t_opt.zero_grad()
        nn.functional.l1_loss(twin(x), y).backward()
        t_opt.step()
    assert torch.allclose(m.weight.detach(), twin.weight.detach())
    assert torch.allclose(m.bias.grad, twin.bias.grad)
    print("evidence holds: the weights and gradients match a zeroed replay")
