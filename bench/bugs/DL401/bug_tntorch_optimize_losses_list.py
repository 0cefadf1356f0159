# source: https://github.com/rballester/tntorch/pull/19
# category: DL401
# expect: flag 59
# evidence: after optimize() runs max_iter steps, every entry of the losses history is still a tensor with a grad_fn, so one autograd graph per iteration is kept alive for the whole run.
from functools import reduce
import time
import torch


class Tensor(object):
    """Tiny tensor-train stand-in for tntorch.Tensor: a list of 3D cores (and optional Tucker factors Us)."""

    def __init__(self, cores, Us=None):
        self.cores = cores
        self.Us = Us if Us is not None else [None] * len(cores)

    @property
    def ndim(self):
        return len(self.cores)

    def full(self):
        result = self.cores[0]
        for core in self.cores[1:]:
            result = torch.einsum('...i,ijk->...jk', result, core)
        return result[0, ..., 0]


def rand(shape, ranks_tt, requires_grad=False):
    ranks = [1] + list(ranks_tt) + [1]
    cores = [torch.randn(ranks[i], shape[i], ranks[i + 1]).mul_(0.5).requires_grad_(requires_grad)
             for i in range(len(shape))]
    return Tensor(cores)


def optimize(tensors, loss_function, tol=1e-4, max_iter=10000, print_freq=500, verbose=True):
    """
    High-level wrapper for iterative learning.
    """

    if not isinstance(tensors, (list, tuple)):
        tensors = [tensors]
    parameters = []
    for t in tensors:
        parameters.extend([c for c in t.cores if c.requires_grad])
        parameters.extend([U for U in t.Us if U is not None and U.requires_grad])
    if len(parameters) == 0:
        raise ValueError("There are no parameters to optimize. Did you forget a requires_grad=True somewhere?")

    optimizer = torch.optim.Adam(parameters)
    losses = []
    converged = False
    start = time.time()
    iter = 0
    while True:
        optimizer.zero_grad()
        loss = loss_function(*tensors)
        if not isinstance(loss, (tuple, list)):
            loss = [loss]
        losses.append(reduce(lambda x, y: x + y, loss))
        if len(losses) >= 2:
            delta_loss = (losses[-1] - losses[-2])
        else:
            delta_loss = float('-inf')
        if iter >= 2 and tol is not None and (losses[-1] <= tol or -delta_loss / losses[-1] <= tol) and losses[-2] - \
                losses[-1] < losses[-3] - losses[-2]:
            converged = True
            break
        if iter == max_iter:
            break
        if verbose and iter % print_freq == 0:
            print('iter: {: <6} | loss: '.format(iter), end='')
            print(' + '.join(['{:10.6f}'.format(l.item()) for l in loss]), end='')
            print(' | total time: {:9.4f}'.format(time.time() - start))
        losses[-1].backward()
        optimizer.step()
        iter += 1
    if verbose:
        print('iter: {: <6} | loss: '.format(iter), end='')
        print(' + '.join(['{:10.6f}'.format(l.item()) for l in loss]), end='')
        print(' | total time: {:9.4f}'.format(time.time() - start), end='')
        if converged:
            print(' <- converged (tol={})'.format(tol))
        else:
            print(' <- max_iter was reached')
    return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    gt = torch.randn(6, 6, 6)
    t = rand(gt.shape, ranks_tt=[3, 3], requires_grad=True)

    def loss_function(t):
        return torch.norm(t.full() - gt) ** 2

    losses = optimize(t, loss_function, tol=None, max_iter=12, print_freq=5)
    assert len(losses) == 13
    assert all(l.grad_fn is not None for l in losses), "history entries lost their graphs"
    print("evidence holds: all %d stored losses still carry a grad_fn (one graph kept per iteration)" % len(losses))
