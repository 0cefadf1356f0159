# source: https://github.com/pytorch/examples/pull/781
# category: DL502
# expect: flag 49
# evidence: the hand-written SGD step param.add_(-0.1 * param.grad) on fc's parameters raises "a leaf Variable that requires grad is being used in an in-place operation."
from itertools import count

import torch
import torch.nn.functional as F

POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    """Approximated function."""
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    result = 'y = '
    for i, w in enumerate(W):
        result += '{:+.2f} x^{} '.format(w, i + 1)
    result += '{:+.2f}'.format(b[0])
    return result


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    y = f(x)
    return x, y


def train(fc, max_batches=100):
    for batch_idx in count(1):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.add_(-0.1 * param.grad)
        if loss < 1e-3 or batch_idx >= max_batches:
            break
    print('Loss: {:.6f} after {} batches'.format(loss, batch_idx))
    print('==> Learned function:\t' + poly_desc(fc.weight.view(-1), fc.bias))
    return fc


if __name__ == "__main__":
    torch.manual_seed(0)
    fc = torch.nn.Linear(W_target.size(0), 1)
    before = fc.weight.detach().clone()
    try:
        train(fc)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised == "a leaf Variable that requires grad is being used in an in-place operation.", raised
    assert torch.equal(fc.weight.detach(), before)
    print("evidence holds: the manual SGD step on fc.parameters() outside no_grad raises the leaf in-place error")
