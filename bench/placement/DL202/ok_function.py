# source: placement matrix
# category: DL202
# expect: clean
# evidence: train() computes the soft-target term on the live logits, so it adds gradient and the net ends with weights different from cross-entropy-only training.
import copy
import torch
import torch.nn as nn


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(5, 6)
        self.l2 = nn.Linear(6, 3)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))


def train(net, opt, batches, alpha):
    for inp, lab, probs in batches:
        opt.zero_grad()
        z = net(inp)
        soft_term = nn.functional.kl_div(nn.functional.log_softmax(z, 1), probs, reduction="batchmean")
        total = (1 - alpha) * nn.functional.cross_entropy(z, lab) + alpha * soft_term
        total.backward()
        opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = Student()
    data = [(torch.randn(8, 5), torch.randint(0, 3, (8,)), torch.softmax(2 * torch.randn(8, 3), 1)) for _ in range(3)]
    ref = copy.deepcopy(net)
    train(net, torch.optim.SGD(net.parameters(), lr=0.5), data, alpha=0.5)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    for inp, lab, probs in data:
        ref_opt.zero_grad()
        (0.5 * nn.functional.cross_entropy(ref(inp), lab)).backward()
        ref_opt.step()
    assert not torch.allclose(net.l2.weight, ref.l2.weight), "the soft term had no effect"
    print("evidence holds: the soft-target term trains the net (weights differ from CE-only training)")
