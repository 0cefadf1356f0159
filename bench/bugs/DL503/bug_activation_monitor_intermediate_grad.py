# source: https://github.com/pytorch/pytorch/issues/2677
# category: DL503
# expect: flag 27, 37
# evidence: the monitor stores each conv output during forward; after final.backward() every stored output has .grad None, so gradient_stats() reports nothing
import torch
import torch.nn as nn


class ActivationMonitor:
    """Keeps the outputs of the watched layers so their gradients can be inspected after backward."""

    def __init__(self, model, layer_types=(nn.Conv2d,)):
        self.outputs = {}
        self.handles = []
        for name, module in model.named_modules():
            if isinstance(module, layer_types):
                self.handles.append(module.register_forward_hook(self._save(name)))

    def _save(self, name):
        def hook(module, inp, out):
            self.outputs[name] = out
        return hook

    def gradient_stats(self):
        stats = {}
        for name, y in self.outputs.items():
            if y.grad is not None:
                stats[name] = (y.grad.mean().item(), y.grad.std().item())
        return stats


def step(model, monitor, x):
    y = model(x)
    final = torch.sum(y)
    final.backward()
    for name, out in monitor.outputs.items():
        print(name, 'y.grad', out.grad)
        print(name, 'requires_grad', out.requires_grad)
    return monitor.gradient_stats()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 1, 3), nn.ReLU(), nn.Conv2d(1, 1, 3))
    monitor = ActivationMonitor(model)
    x = torch.rand(8, 1, 7, 7, requires_grad=True)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = step(model, monitor, x)
        assert len(monitor.outputs) == 2
        assert all(out.requires_grad and out.grad is None for out in monitor.outputs.values())
    assert stats == {}
    assert x.grad is not None
    print("evidence holds: the stored layer outputs require grad but are non-leaf: their .grad stays None")
