# source: https://github.com/microsoft/tensorwatch/issues/25
# category: DL504
# expect: flag 14
# evidence: after the vanilla-gradient method flagged the shared input, SmoothGrad's noisy_inp = inp + noise is a non-leaf and _backprop's inp.requires_grad = True raises "you can only change requires_grad flags of leaf variables."
import torch
import torch.nn as nn


class VanillaGradExplainer(object):
    def __init__(self, model):
        self.model = model

    def _backprop(self, inp, ind):
        inp.requires_grad = True
        if inp.grad is not None:
            inp.grad.zero_()
        output = self.model(inp)
        if ind is None:
            ind = output.max(1)[1]
        grad_out = torch.zeros_like(output)
        grad_out.scatter_(1, ind.unsqueeze(0).t(), 1.0)
        output.backward(grad_out)
        return inp.grad

    def explain(self, inp, ind=None, raw_inp=None):
        return self._backprop(inp, ind)


class SmoothGradExplainer(object):
    def __init__(self, model, base_explainer=None, stdev_spread=0.15, nsamples=4, magnitude=True):
        self.base_explainer = base_explainer or VanillaGradExplainer(model)
        self.stdev_spread = stdev_spread
        self.nsamples = nsamples
        self.magnitude = magnitude

    def explain(self, inp, ind=None, raw_inp=None):
        stdev = self.stdev_spread * (inp.max() - inp.min())
        total_gradients = 0
        for i in range(self.nsamples):
            noise = torch.randn_like(inp) * stdev
            noisy_inp = inp + noise
            grad = self.base_explainer.explain(noisy_inp, ind)
            total_gradients = total_gradients + (grad * grad if self.magnitude else grad)
        return total_gradients / self.nsamples


def get_saliency(model, raw_input, input, label, method):
    exp = {"vanilla_grad": VanillaGradExplainer, "smooth_grad": SmoothGradExplainer}[method](model)
    saliency = exp.explain(input, label, raw_input)
    return saliency.abs().sum(dim=1)[0]


def get_image_saliency_results(model, raw_image, input, label, methods=("vanilla_grad", "smooth_grad")):
    results = []
    for method in methods:
        sal = get_saliency(model, raw_image, input, label, method=method)
        results.append((method, sal))
    return results


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
    model.eval()
    input_tensor = torch.rand(1, 3, 8, 8)
    prediction_tensor = torch.tensor([2])
    sal = get_saliency(model, None, input_tensor.clone(), prediction_tensor, "smooth_grad")  # alone it works
    assert sal.shape == (8, 8)
    try:
        get_image_saliency_results(model, None, input_tensor, prediction_tensor)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised == "you can only change requires_grad flags of leaf variables.", raised
    print("evidence holds: once the shared input requires grad, the noisy copy is a non-leaf and setting its flag raises")
