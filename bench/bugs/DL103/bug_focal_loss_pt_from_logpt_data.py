# source: https://github.com/clcarwin/focal_loss_pytorch/issues/5
# category: DL103
# expect: flag 35
# evidence: pt is read through logpt.data, so the (1-pt)**gamma factor is a constant to autograd: with gamma=2 the logit gradients differ from the analytic focal-loss gradient, while gamma=0 (the repo's own test) still matches cross-entropy
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class FocalLoss(nn.Module):
    def __init__(self, gamma=0, alpha=None, size_average=True):
        super(FocalLoss, self).__init__()
        self.gamma = gamma
        self.alpha = alpha
        if isinstance(alpha, (float, int)):
            self.alpha = torch.Tensor([alpha, 1 - alpha])
        if isinstance(alpha, list):
            self.alpha = torch.Tensor(alpha)
        self.size_average = size_average

    def forward(self, input, target):
        if input.dim() > 2:
            # N,C,H,W => N,C,H*W => N,H*W,C => N*H*W,C
            input = input.view(input.size(0), input.size(1), -1)
            input = input.transpose(1, 2)
            input = input.contiguous().view(-1, input.size(2))
        target = target.view(-1, 1)

        logpt = F.log_softmax(input, dim=1)
        logpt = logpt.gather(1, target)
        logpt = logpt.view(-1)
        # the modulating factor is computed from a .data read: autograd never
        # sees that pt depends on the logits
        pt = Variable(logpt.data.exp())

        if self.alpha is not None:
            if self.alpha.type() != input.data.type():
                self.alpha = self.alpha.type_as(input.data)
            at = self.alpha.gather(0, target.data.view(-1))
            logpt = logpt * Variable(at)

        loss = -1 * (1 - pt) ** self.gamma * logpt
        if self.size_average:
            return loss.mean()
        else:
            return loss.sum()


def focal_loss_reference(logits, target, gamma):
    """Focal loss of Lin et al. with pt kept in the graph."""
    logpt = F.log_softmax(logits, dim=1).gather(1, target.view(-1, 1)).view(-1)
    pt = logpt.exp()
    return (-1 * (1 - pt) ** gamma * logpt).mean()


def logit_grad(loss_fn, logits, target):
    x = logits.clone().requires_grad_(True)
    loss = loss_fn(x, target)
    loss.backward()
    return loss.detach(), x.grad


if __name__ == "__main__":
    torch.manual_seed(0)
    logits = torch.randn(16, 4) * 3
    target = torch.randint(0, 4, (16,))

    # what the repo's focalloss_test.py checks: gamma=0 equals cross-entropy
    loss0, g0 = logit_grad(FocalLoss(gamma=0), logits, target)
    ce, g_ce = logit_grad(nn.CrossEntropyLoss(), logits, target)
    assert torch.allclose(loss0, ce, atol=1e-6)
    assert torch.allclose(g0, g_ce, atol=1e-6)

    # the setting the paper uses: gamma=2
    loss2, g_bug = logit_grad(FocalLoss(gamma=2), logits, target)
    ref2, g_ref = logit_grad(lambda x, t: focal_loss_reference(x, t, 2), logits, target)
    assert torch.allclose(loss2, ref2, atol=1e-6), "same forward value"
    diff = (g_bug - g_ref).abs().max().item()
    assert diff > 1e-3, diff
    assert not torch.allclose(g_bug, g_ref, atol=1e-4)
    print("evidence holds: same focal loss value, but with gamma=2 the logit gradients differ from the analytic ones (max diff %.4f)" % diff)
