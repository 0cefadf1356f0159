# source: https://github.com/pytorch/pytorch/blob/main/torch/optim/lbfgs.py
# category: DL302
# expect: clean
# evidence: step() runs under @torch.no_grad() but wraps the closure with torch.enable_grad(), so the closure's loss.backward() fills the gradients on every evaluation and the quasi-Newton steps drive the loss down
import torch
import torch.nn as nn
from torch.optim import Optimizer


class LBFGS(Optimizer):
    """A compact L-BFGS in the structure of torch.optim.LBFGS (fixed step, no line search)."""

    def __init__(self, params, lr=1, max_iter=20, history_size=10, tolerance_grad=1e-7):
        defaults = dict(lr=lr, max_iter=max_iter, history_size=history_size, tolerance_grad=tolerance_grad)
        super().__init__(params, defaults)
        self._params = self.param_groups[0]["params"]

    def _gather_flat_grad(self):
        views = []
        for p in self._params:
            views.append(p.new_zeros(p.numel()) if p.grad is None else p.grad.view(-1))
        return torch.cat(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            numel = p.numel()
            p.add_(update[offset:offset + numel].view_as(p), alpha=step_size)
            offset += numel

    @torch.no_grad()
    def step(self, closure):
        # Make sure the closure is always called with grad enabled
        closure = torch.enable_grad()(closure)
        group = self.param_groups[0]
        lr, max_iter, history_size = group["lr"], group["max_iter"], group["history_size"]

        orig_loss = closure()
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max() <= group["tolerance_grad"]:
            return orig_loss

        old_dirs, old_stps, ro = [], [], []
        H_diag = 1
        prev_flat_grad, d, t = None, None, lr
        for n_iter in range(1, max_iter + 1):
            if n_iter == 1:
                d = flat_grad.neg()
                t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0); old_stps.pop(0); ro.pop(0)
                    old_dirs.append(y); old_stps.append(s); ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                q = flat_grad.neg()
                al = [None] * len(old_dirs)
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = torch.mul(q, H_diag)
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)
                t = lr
            prev_flat_grad = flat_grad.clone()
            self._add_grad(t, d)
            closure()
            flat_grad = self._gather_flat_grad()
            if flat_grad.abs().max() <= group["tolerance_grad"]:
                break
        return orig_loss


def fit(model, x, y, steps=5):
    optimizer = LBFGS(model.parameters(), lr=1, max_iter=10)
    criterion = nn.MSELoss()
    history = []
    for _ in range(steps):
        def closure():
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            return loss
        history.append(optimizer.step(closure).item())
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(64, 3)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]]) + 0.3
    model = nn.Linear(3, 1)
    history = fit(model, x, y)
    assert model.weight.grad is not None
    assert history[-1] < history[0] / 100, history
    print("evidence holds: the closure's backward inside the no_grad step computes gradients; L-BFGS fits the regression")
