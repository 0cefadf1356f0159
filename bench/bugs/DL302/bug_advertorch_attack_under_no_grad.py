# source: https://github.com/BorealisAI/advertorch/issues/79
# category: DL302
# expect: flag 22, 54
# evidence: test() wraps its whole loop in torch.no_grad(), so the PGD attack's loss.backward() inside adversary.perturb raises "element 0 of tensors does not require grad and does not have a grad_fn".
import torch
import torch.nn as nn


def clamp(input, min=None, max=None):
    return torch.clamp(input, min=min, max=max)


def perturb_iterative(xvar, yvar, predict, nb_iter, eps, eps_iter, loss_fn,
                      delta_init=None, minimize=False, clip_min=0.0, clip_max=1.0):
    delta = torch.zeros_like(xvar) if delta_init is None else delta_init
    delta.requires_grad_()
    for ii in range(nb_iter):
        outputs = predict(xvar + delta)
        loss = loss_fn(outputs, yvar)
        if minimize:
            loss = -loss
        loss.backward()
        grad_sign = delta.grad.data.sign()
        delta.data = delta.data + eps_iter * grad_sign
        delta.data = clamp(delta.data, -eps, eps)
        delta.data = clamp(xvar.data + delta.data, clip_min, clip_max) - xvar.data
        delta.grad.data.zero_()
    return clamp(xvar + delta, clip_min, clip_max)


class LinfPGDAttack:
    def __init__(self, predict, loss_fn=None, eps=0.3, nb_iter=3, eps_iter=0.01,
                 rand_init=True, clip_min=0.0, clip_max=1.0, targeted=False):
        self.predict = predict
        self.loss_fn = loss_fn or nn.CrossEntropyLoss(reduction="sum")
        self.eps, self.nb_iter, self.eps_iter = eps, nb_iter, eps_iter
        self.rand_init, self.clip_min, self.clip_max = rand_init, clip_min, clip_max
        self.targeted = targeted

    def perturb(self, x, y=None):
        delta = torch.zeros_like(x)
        if self.rand_init:
            delta.uniform_(-self.eps, self.eps)
            delta = clamp(x + delta, self.clip_min, self.clip_max) - x
        return perturb_iterative(x, y, self.predict, nb_iter=self.nb_iter, eps=self.eps,
                                 eps_iter=self.eps_iter, loss_fn=self.loss_fn,
                                 minimize=self.targeted, clip_min=self.clip_min,
                                 clip_max=self.clip_max, delta_init=delta)


def test(net, testloader, adversary):
    net.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for batch_idx, (inputs, targets) in enumerate(testloader):
            adv_untargeted = adversary.perturb(inputs, targets)
            inputs = adv_untargeted

            outputs = net(inputs)
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
    return 100. * correct / total


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(16, 10))
    adversary = LinfPGDAttack(net, eps=0.3, nb_iter=3, eps_iter=0.01)
    testloader = [(torch.rand(4, 1, 4, 4), torch.randint(0, 10, (4,))) for _ in range(2)]
    msg = None
    try:
        test(net, testloader, adversary)
    except RuntimeError as e:
        msg = str(e)
    assert msg is not None, "attack under no_grad should not be able to backpropagate"
    assert "does not require grad and does not have a grad_fn" in msg, msg
    print("evidence holds: loss.backward() inside the no_grad test loop raised:", msg.splitlines()[0])
