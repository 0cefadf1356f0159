# source: https://github.com/DequanWang/tent/blob/master/tent.py
# category: DL302
# expect: clean
# evidence: the accuracy loop runs under torch.no_grad(), yet optim_model (decorated with @torch.enable_grad()) backpropagates the entropy and updates the batch-norm affine parameters
from copy import deepcopy

import torch
from torch import nn
from torch.optim import SGD


def collect_bn_params(model):
    """Only the affine parameters after normalization are adapted at test time."""
    bn_params, bn_names = [], set()
    for name, _ in model.named_buffers():
        if "running_mean" in name:
            bn_names.add(name.replace('running_mean', 'weight'))
            bn_names.add(name.replace('running_mean', 'bias'))
    for name, params in model.named_parameters():
        if name in bn_names:
            params.requires_grad = True
            bn_params.append(params)
        else:
            params.requires_grad = False
    return bn_params


def softmax_entropy(x: torch.Tensor) -> torch.Tensor:
    return -(x.softmax(1) * x.log_softmax(1)).sum(1)


class SoftmaxEntropy(nn.Module):
    def forward(self, x):
        return softmax_entropy(x).mean(0)


def save_model_and_optimizer(model, optimizer):
    return deepcopy(model.state_dict()), deepcopy(optimizer.state_dict())


def load_model_and_optimizer(model, optimizer, model_state, optimizer_state):
    model.load_state_dict(model_state, strict=True)
    optimizer.load_state_dict(optimizer_state)


@torch.enable_grad()
def optim_model(inputs, model, optimizer, loss_fun):
    preds = model(inputs)
    loss = loss_fun(preds)
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
    return preds


class Tent(nn.Module):
    def __init__(self, model, steps=1, reset_state=False, eval_only=False):
        super().__init__()
        self.model = model
        self.iter = steps
        self.eval_only = eval_only
        self.reset_state = reset_state
        self.loss_fun = SoftmaxEntropy()
        self.optimizer = SGD(collect_bn_params(self.model), lr=0.5, momentum=0.9)
        self.model_state, self.optimizer_state = save_model_and_optimizer(self.model, self.optimizer)

    def _reset_state(self):
        load_model_and_optimizer(self.model, self.optimizer, self.model_state, self.optimizer_state)

    def forward(self, x):
        if self.reset_state:
            self._reset_state()
        if not self.eval_only:
            self.model.train()
            for _ in range(self.iter):
                x = optim_model(x, self.model, self.optimizer, self.loss_fun)
        else:
            x = self.model(x)
        return x


def clean_accuracy(model, x, y, batch_size=4):
    acc = 0.
    n_batches = x.shape[0] // batch_size
    with torch.no_grad():
        for counter in range(n_batches):
            x_curr = x[counter * batch_size:(counter + 1) * batch_size]
            y_curr = y[counter * batch_size:(counter + 1) * batch_size]
            output = model(x_curr)
            acc += (output.max(1)[1] == y_curr).float().sum()
    return acc.item() / x.shape[0]


if __name__ == "__main__":
    torch.manual_seed(0)
    base = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5),
    )
    tented = Tent(base, steps=1)
    bn = base[1]
    w0, b0 = bn.weight.detach().clone(), bn.bias.detach().clone()
    conv0 = base[0].weight.detach().clone()

    x, y = torch.randn(8, 3, 6, 6), torch.randint(0, 5, (8,))
    acc = clean_accuracy(tented, x, y)

    assert 0.0 <= acc <= 1.0
    assert not torch.equal(w0, bn.weight.detach()) or not torch.equal(b0, bn.bias.detach())
    assert bn.weight.grad is not None
    assert torch.equal(conv0, base[0].weight.detach())  # frozen parameters stay as they were
    print("evidence holds: under the no_grad evaluation loop, the enable_grad-decorated step adapts the BN parameters")
