# source: https://github.com/pytorch/pytorch/blob/main/torch/nn/modules/module.py
# category: DL206
# expect: clean
# evidence: Module.zero_grad(set_to_none=False) cuts graph-carrying grads with p.grad.detach_() and zeroes them in place: afterwards every grad is zero, has no grad_fn and needs no grad
import warnings

import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))

    def zero_grad(self, set_to_none: bool = True) -> None:
        r"""Reset gradients of all model parameters."""
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()


def train_with_gradient_penalty(model, optimizer, batches, penalty=0.1):
    """Each step backpropagates with create_graph=True, so the grads left behind carry a graph."""
    model.train()
    for inputs, targets in batches:
        model.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(inputs), targets)
        loss.backward(create_graph=True)
        grad_norm = sum(p.grad.pow(2).sum() for p in model.parameters())
        (penalty * grad_norm).backward()
        optimizer.step()


if __name__ == "__main__":
    warnings.filterwarnings("ignore", message="Using backward\\(\\) with create_graph=True")
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(3)]
    train_with_gradient_penalty(model, optimizer, batches)
    assert any(p.grad.grad_fn is not None for p in model.parameters())
    model.zero_grad(set_to_none=False)
    for p in model.parameters():
        assert p.grad is not None and p.grad.grad_fn is None and not p.grad.requires_grad
        assert torch.count_nonzero(p.grad) == 0
    print("evidence holds: the in-place detach_() and zero_() leave zeroed grads with no graph")
