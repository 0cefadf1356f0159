# source: https://github.com/pytorch/pytorch/issues/7462
# category: DL205
# expect: clean
# evidence: pt.detach_() turns the focal weight into a constant in place; the gradient equals the one with the weight computed under no_grad
import torch
from torch import nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    """Focal loss whose modulating factor is treated as a constant weight."""

    def __init__(self, class_num, gamma=2.0):
        super(FocalLoss, self).__init__()
        self.class_num = class_num
        self.gamma = gamma

    def forward(self, inputs, targets):
        P = F.softmax(inputs, dim=1)
        class_mask = torch.zeros_like(P)
        class_mask.scatter_(1, targets.view(-1, 1), 1.)
        probs = (P * class_mask).sum(1).view(-1, 1)
        pt = torch.pow(1 - probs, self.gamma)
        pt.detach_()
        log_p = probs.log()
        batch_loss = -(pt * log_p)
        return batch_loss.mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    logits = torch.randn(6, 4, requires_grad=True)
    targets = torch.randint(0, 4, (6,))
    FocalLoss(4, gamma=2.0)(logits, targets).backward()

    ref_logits = logits.detach().clone().requires_grad_(True)
    P = F.softmax(ref_logits, dim=1)
    probs = P.gather(1, targets.view(-1, 1))
    with torch.no_grad():
        weight = (1 - probs).pow(2.0)
    (-(weight * probs.log())).mean().backward()
    assert torch.allclose(logits.grad, ref_logits.grad, atol=1e-6)

    logits.grad = None
    FocalLoss(4, gamma=0.0)(logits, targets).backward()
    plain = torch.autograd.grad(F.cross_entropy(logits, targets), logits)[0]
    assert torch.allclose(logits.grad, plain, atol=1e-6)
    print("evidence holds: the in-place detach only removes the weight's own branch; log p still trains")
