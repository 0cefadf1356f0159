# source: https://github.com/ain-soph/trojanzoo/pull/67
# category: DL301
# expect: clean
# evidence: _validate keeps torch.no_grad() inside the loop on purpose: get_data_fn runs a PGD attack that needs input gradients, while the model forward used for the metrics runs under no_grad, so outputs carry no graph and the attack really changes the inputs.
import torch
import torch.nn as nn


class PGD:
    def __init__(self, eps=0.1, alpha=0.05, iteration=3):
        self.eps, self.alpha, self.iteration = eps, alpha, iteration

    def optimize(self, _input, loss_fn):
        noise = torch.zeros_like(_input)
        for _ in range(self.iteration):
            X = (_input + noise).detach().requires_grad_()
            loss = loss_fn(X)
            grad = torch.autograd.grad(loss, X)[0]
            noise = (noise + self.alpha * grad.sign()).clamp(-self.eps, self.eps)
        return (_input + noise).clamp(0, 1).detach()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self._model = nn.Sequential(nn.Flatten(), nn.Linear(16, 10))
        self.criterion = nn.CrossEntropyLoss()
        self.pgd = PGD()

    def forward(self, x):
        return self._model(x)

    def get_data(self, data, adv=False, **kwargs):
        _input, _label = data
        if adv:
            _input = self.pgd.optimize(_input, lambda X: self.criterion(self(X), _label))
        return _input, _label


def _validate(module, num_classes, loader, get_data_fn, criterion, **kwargs):
    module.eval()
    correct, total, loss_sum, outputs_seen = 0, 0, 0.0, []
    for data in loader:
        _input, _label = get_data_fn(data, mode='valid', **kwargs)
        with torch.no_grad():
            _output = module(_input)
            loss = float(criterion(_output, _label))
        outputs_seen.append(_output)
        loss_sum += loss * len(_label)
        correct += (_output.argmax(1) == _label).sum().item()
        total += len(_label)
    return correct / total, loss_sum / total, outputs_seen


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Model()
    loader = [(torch.rand(4, 1, 4, 4), torch.randint(0, 10, (4,))) for _ in range(3)]
    clean_acc, clean_loss, _ = _validate(model, 10, loader, model.get_data, model.criterion)
    adv_acc, adv_loss, outs = _validate(model, 10, loader, model.get_data, model.criterion, adv=True)

    assert all(o.grad_fn is None and not o.requires_grad for o in outs), "metric forwards keep no graph"
    assert adv_loss > clean_loss, "the attack inside get_data_fn needed and used gradients"
    assert all(p.grad is None for p in model.parameters())
    print("evidence holds: clean loss %.4f -> adversarial loss %.4f; validation outputs carry no graph" % (clean_loss, adv_loss))
