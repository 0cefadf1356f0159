# source: https://github.com/ultralytics/yolov5/issues/12808
# category: DL302
# expect: flag 50, 84
# evidence: run() is wrapped by @smart_inference_mode(); the PGD attack added inside it calls loss.backward() and fails with "element 0 of tensors does not require grad" even though the call sits in torch.enable_grad().
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def smart_inference_mode(torch_1_9=True):
    """Applies torch.inference_mode() decorator if torch>=1.9.0 else torch.no_grad() decorator."""

    def decorate(fn):
        return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)

    return decorate


# ---- advertorch (attacks/iterative_projected_gradient.py, utils.py) ----
def clamp(input, min=None, max=None):
    return torch.clamp(input, min=min, max=max)


def batch_multiply(float_or_vector, tensor):
    return float_or_vector * tensor


def batch_clamp(float_or_vector, tensor):
    return torch.clamp(tensor, -float_or_vector, float_or_vector)


def perturb_iterative(xvar, yvar, predict, nb_iter, eps, eps_iter, loss_fn,
                      delta_init=None, minimize=False, ord=np.inf,
                      clip_min=0.0, clip_max=1.0):
    if delta_init is not None:
        delta = delta_init
    else:
        delta = torch.zeros_like(xvar)

    delta.requires_grad_()
    for ii in range(nb_iter):
        outputs = predict(xvar + delta)
        loss = loss_fn(outputs, yvar)
        if minimize:
            loss = -loss

        loss.backward()
        if ord == np.inf:
            grad_sign = delta.grad.data.sign()
            delta.data = delta.data + batch_multiply(eps_iter, grad_sign)
            delta.data = batch_clamp(eps, delta.data)
            delta.data = clamp(xvar.data + delta.data, clip_min, clip_max) - xvar.data
        delta.grad.data.zero_()

    x_adv = clamp(xvar + delta, clip_min, clip_max)
    return x_adv


class LinfPGDAttack:
    def __init__(self, predict, loss_fn=None, eps=0.3, nb_iter=40, eps_iter=0.01,
                 rand_init=True, clip_min=0., clip_max=1., targeted=False):
        self.predict = predict
        self.loss_fn = loss_fn if loss_fn is not None else nn.CrossEntropyLoss(reduction="sum")
        self.eps, self.nb_iter, self.eps_iter = eps, nb_iter, eps_iter
        self.rand_init, self.clip_min, self.clip_max = rand_init, clip_min, clip_max
        self.targeted = targeted

    def perturb(self, x, y=None):
        x, y = x.detach().clone(), y.detach().clone()
        delta = torch.zeros_like(x)
        delta = nn.Parameter(delta)
        if self.rand_init:
            delta.data.uniform_(-self.eps, self.eps)
            delta.data = clamp(x + delta.data, min=self.clip_min, max=self.clip_max) - x
        return perturb_iterative(x, y, self.predict, nb_iter=self.nb_iter, eps=self.eps,
                                 eps_iter=self.eps_iter, loss_fn=self.loss_fn, minimize=self.targeted,
                                 clip_min=self.clip_min, clip_max=self.clip_max, delta_init=delta)


# ---- yolov5 classify/val.py ----
@smart_inference_mode()
def run(model=None, dataloader=None, criterion=None, device=torch.device("cpu")):
    attacker = LinfPGDAttack(
        model, loss_fn=None, eps=8 / 255, eps_iter=2 / 255, nb_iter=10,
        rand_init=True, clip_min=0.0, clip_max=1.0, targeted=False,
    )
    model.eval()
    pred, targets, loss = [], [], 0
    n = len(dataloader)  # number of batches
    for images, labels in dataloader:
        images, labels = images.to(device, non_blocking=True), labels.to(device)
        with torch.enable_grad():
            img_adv = attacker.perturb(images, labels.to(device))

        # Inference
        y = model(img_adv)

        pred.append(y.argsort(1, descending=True)[:, :5])
        targets.append(labels)
        if criterion:
            loss += criterion(y, labels)

    loss /= n
    pred, targets = torch.cat(pred), torch.cat(targets)
    correct = (targets[:, None] == pred).float()
    acc = torch.stack((correct[:, 0], correct.max(1).values), dim=1)  # (top1, top5) accuracy
    top1, top5 = acc.mean(0).tolist()
    return top1, top5, loss


class ClassificationModel(nn.Module):
    def __init__(self, nc=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, 2, 1)
        self.linear = nn.Linear(8, nc)

    def forward(self, x):
        return self.linear(F.adaptive_avg_pool2d(F.silu(self.conv(x)), 1).flatten(1))


if __name__ == "__main__":
    model = ClassificationModel()
    data = torch.utils.data.TensorDataset(torch.rand(8, 3, 32, 32), torch.randint(0, 10, (8,)))
    dataloader = torch.utils.data.DataLoader(data, batch_size=4)
    try:
        run(model=model, dataloader=dataloader, criterion=nn.CrossEntropyLoss())
        raise AssertionError("attack unexpectedly succeeded")
    except RuntimeError as e:
        msg = str(e)
    assert "does not require grad" in msg, msg
    print("evidence holds: PGD backward inside the inference-mode run() raised:", msg.splitlines()[0])
