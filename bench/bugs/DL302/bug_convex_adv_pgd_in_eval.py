# source: https://github.com/locuslab/convex_adversarial/issues/34
# category: DL302
# expect: flag 61, 85, 97
# evidence: evaluate_robust switches grad mode off with torch.set_grad_enabled(False) and then calls _pgd, whose loss.backward() raises "element 0 of tensors does not require grad".
import sys
import time

import torch
import torch.nn as nn
import torch.optim as optim

DEBUG = False


class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def robust_loss(net, epsilon, X, y, **kwargs):
    # interval-bound stand-in for convex_adversarial.robust_loss
    lower, upper = X - epsilon, X + epsilon
    for layer in net:
        if isinstance(layer, nn.Linear):
            mid, rad = (upper + lower) / 2, (upper - lower) / 2
            mid = layer(mid)
            rad = rad @ layer.weight.abs().t()
            lower, upper = mid - rad, mid + rad
        else:
            lower, upper = layer(lower), layer(upper)
    worst = upper.clone()
    worst[torch.arange(y.size(0)), y] = lower[torch.arange(y.size(0)), y]
    ce = nn.CrossEntropyLoss()(worst, y)
    err = (worst.max(1)[1] != y).float().sum() / X.size(0)
    return ce, err


def _pgd(model, X, y, epsilon, niters=100, alpha=0.01):
    out = model(X)
    ce = nn.CrossEntropyLoss()(out, y)
    err = (out.max(1)[1] != y).float().sum() / X.size(0)

    X_pgd = X.detach().clone().requires_grad_(True)
    for i in range(niters):
        opt = optim.Adam([X_pgd], lr=1e-3)
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(model(X_pgd), y)
        loss.backward()
        eta = alpha * X_pgd.grad.sign()
        X_pgd = (X_pgd.detach() + eta).requires_grad_(True)

        # adjust to be within [-epsilon, epsilon]
        eta = torch.clamp(X_pgd.detach() - X, -epsilon, epsilon)
        X_pgd = (X + eta).detach().requires_grad_(True)

    err_pgd = (model(X_pgd).max(1)[1] != y).float().sum() / X.size(0)
    return err, err_pgd


def evaluate_robust(loader, model, epsilon, epoch, log, verbose,
                    real_time=False, parallel=False, **kwargs):
    batch_time = AverageMeter()
    losses = AverageMeter()
    errors = AverageMeter()
    robust_losses = AverageMeter()
    robust_errors = AverageMeter()

    model.eval()

    end = time.time()

    torch.set_grad_enabled(False)
    for i, (X, y) in enumerate(loader):
        X, y = X, y.long()
        if y.dim() == 2:
            y = y.squeeze(1)

        robust_ce, robust_err = robust_loss(model, epsilon, X, y, **kwargs)

        out = model(X)
        ce = nn.CrossEntropyLoss()(out, y)
        err = (out.max(1)[1] != y).float().sum() / X.size(0)

        _, pgd_err = _pgd(model, X, y, epsilon)

        # measure accuracy and record loss
        losses.update(ce.item(), X.size(0))
        errors.update(err, X.size(0))
        robust_losses.update(robust_ce.item(), X.size(0))
        robust_errors.update(robust_err, X.size(0))

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        print(epoch, i, robust_ce.item(), robust_err, ce.item(), err.item(), file=log)
        log.flush()

        del X, y, robust_ce, out, ce
        if DEBUG and i == 10:
            break
    torch.set_grad_enabled(True)
    print('')
    print(' * Robust error {rerror.avg:.3f}\t'
          'Error {error.avg:.3f}'
          .format(rerror=robust_errors, error=errors))
    return robust_errors.avg


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    test_loader = [(torch.rand(5, 8), torch.randint(0, 4, (5,))) for _ in range(2)]

    try:
        evaluate_robust(test_loader, model, 0.1, 0, sys.stdout, verbose=False)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    finally:
        torch.set_grad_enabled(True)

    assert raised is not None and "does not require grad" in raised, raised
    print("evidence holds: _pgd's loss.backward() inside evaluate_robust's disabled-grad region raised:", raised.split("\n")[0])
