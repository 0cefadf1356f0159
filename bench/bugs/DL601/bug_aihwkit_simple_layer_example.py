# source: https://github.com/IBM/aihwkit/issues/446
# category: DL601
# expect: flag 34, 40, 42
# evidence: the loss falls, then climbs back up, because every SGD step uses the sum of all earlier gradients
"""Example 1: simple network with one layer.

The network learns to map four inputs onto two sums (analog layer replaced by
a plain nn.Linear, AnalogSGD by SGD).
"""
import torch
from torch import Tensor
from torch.nn import Linear
from torch.nn.functional import mse_loss
from torch.optim import SGD
from torch.optim.optimizer import register_optimizer_step_pre_hook


def make_dataset():
    x = Tensor([[0.1, 0.2, 0.4, 0.3], [0.2, 0.1, 0.1, 0.3]])
    y = Tensor([[1.0, 0.5], [0.7, 0.3]])
    return x, y


def build_model():
    model = Linear(4, 2, bias=True)
    opt = SGD(model.parameters(), lr=0.1)
    return model, opt


def run(epochs=100):
    x, y = make_dataset()
    model, opt = build_model()
    losses = []
    for epoch in range(epochs):
        # Add the training Tensor to the model (input).
        pred = model(x)
        # Add the expected output Tensor.
        loss = mse_loss(pred, y)
        # Run training (backward propagation).
        loss.backward()

        opt.step()
        losses.append(loss.item())
        print('Loss error: {:.16f}'.format(loss))
    return model, losses


if __name__ == "__main__":
    torch.manual_seed(0)
    x, y = make_dataset()
    seen, fresh = [], []

    def record(opt, args, kwargs):
        w, b = opt.param_groups[0]["params"]
        seen.append(w.grad.clone())
        fresh.append(torch.autograd.grad(mse_loss(x @ w.T + b, y), w)[0])

    handle = register_optimizer_step_pre_hook(record)
    model, losses = run(epochs=100)
    handle.remove()

    best = min(range(len(losses)), key=losses.__getitem__)
    assert best < len(losses) - 1
    assert losses[-1] > 5 * losses[best]  # after reaching its minimum the loss climbs back up
    for k in range(len(seen)):
        assert torch.allclose(seen[k], torch.stack(fresh[: k + 1]).sum(0), atol=1e-5)
    assert not torch.allclose(seen[-1], fresh[-1], atol=1e-3)
    print("evidence holds: loss min {:.4f} at epoch {}, back up to {:.4f}; each step used the sum of all gradients so far".format(
        losses[best], best, losses[-1]))
