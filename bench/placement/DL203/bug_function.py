# source: placement matrix
# category: DL203
# expect: flag 14
# evidence: train() backpropagates a loss computed from a detached prediction, which raises "element 0 of tensors does not require grad and does not have a grad_fn" before any update.
import torch
import torch.nn as nn


def train(f, sgd, batches):
    for inp, tgt in batches:
        sgd.zero_grad()
        guess = f(inp).detach()
        cost = ((guess - tgt) ** 2).mean()
        cost.backward()
        sgd.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    sgd = torch.optim.SGD(f.parameters(), lr=0.1)
    data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
    first = f[0].weight.detach().clone()
    caught = None
    try:
        train(f, sgd, data)
    except RuntimeError as e:
        caught = str(e)
    assert caught is not None
    assert "element 0 of tensors does not require grad and does not have a grad_fn" in caught
    assert torch.equal(f[0].weight.detach(), first)
    print("evidence holds: train() raises on backward of a detached-only loss; weights unchanged")
