# source: https://github.com/BorealisAI/advertorch/issues/49
# category: DL503
# expect: flag 99
# evidence: GradientSignAttack.perturb returns xadv = clamp(x + eps*sign), a non-leaf tensor; after backpropagating a loss through the model, fgsm_tensor.grad is None and fgsm_tensor.grad.clone() raises AttributeError.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def replicate_input(x):
    return x.detach().clone()


def clamp(input, min=None, max=None):
    return torch.clamp(input, min=min, max=max)


def batch_multiply(float_or_vector, tensor):
    return float_or_vector * tensor


class Attack(object):
    def __init__(self, predict, loss_fn, clip_min, clip_max):
        self.predict = predict
        self.loss_fn = loss_fn
        self.clip_min = clip_min
        self.clip_max = clip_max

    def _get_predicted_label(self, x):
        with torch.no_grad():
            outputs = self.predict(x)
        _, y = torch.max(outputs, dim=1)
        return y

    def _verify_and_process_inputs(self, x, y):
        if self.targeted:
            assert y is not None

        if not self.targeted:
            if y is None:
                y = self._get_predicted_label(x)

        x = replicate_input(x)
        y = replicate_input(y)
        return x, y


class GradientSignAttack(Attack):
    """
    One step fast gradient sign method (Goodfellow et al, 2014).
    """

    def __init__(self, predict, loss_fn=None, eps=0.3, clip_min=0.,
                 clip_max=1., targeted=False):
        super(GradientSignAttack, self).__init__(predict, loss_fn, clip_min, clip_max)

        self.eps = eps
        self.targeted = targeted
        if self.loss_fn is None:
            self.loss_fn = nn.CrossEntropyLoss(reduction="sum")

    def perturb(self, x, y=None):
        x, y = self._verify_and_process_inputs(x, y)
        xadv = x.requires_grad_()
        outputs = self.predict(xadv)

        loss = self.loss_fn(outputs, y)
        if self.targeted:
            loss = -loss
        loss.backward()
        grad_sign = xadv.grad.detach().sign()

        xadv = xadv + batch_multiply(self.eps, grad_sign)

        xadv = clamp(xadv, self.clip_min, self.clip_max)

        return xadv


class LeNet5(nn.Module):
    def __init__(self):
        super(LeNet5, self).__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.fc = nn.Linear(6 * 14 * 14, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        return self.fc(x.flatten(1))


def fgsm_input_gradient(model, adversary, cln_data, true_label):
    """User code from the report: gradient of the loss w.r.t. the FGSM example."""
    fgsm_tensor = adversary.perturb(cln_data, true_label)
    model.zero_grad()
    adv_loss = F.cross_entropy(model(fgsm_tensor), true_label)
    adv_loss.backward()
    return fgsm_tensor, fgsm_tensor.grad.clone()


if __name__ == "__main__":
    model = LeNet5()
    model.eval()
    cln_data = torch.rand(4, 1, 28, 28)
    true_label = torch.randint(0, 10, (4,))

    adversary = GradientSignAttack(model, loss_fn=nn.CrossEntropyLoss(reduction="sum"), eps=0.3,
                                   clip_min=0.0, clip_max=1.0, targeted=False)
    try:
        fgsm_input_gradient(model, adversary, cln_data, true_label)
        raise AssertionError("grad unexpectedly populated")
    except AttributeError as e:
        msg = str(e)
    assert not adversary.perturb(cln_data, true_label).is_leaf
    assert "NoneType" in msg and "clone" in msg, msg
    print("evidence holds: the FGSM output is a non-leaf, so its .grad is None ->", msg)
