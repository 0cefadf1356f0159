# source: https://github.com/chr5tphr/zennit/pull/61
# category: DL102
# expect: flag 26, 30
# evidence: the Gamma-rule relevance computed by BasicHook.backward equals the one of the unmodified conv weights, because mod_params swapped weight.data back before torch.autograd.grad ran.
from contextlib import contextmanager

import torch
from torch import nn


@contextmanager
def mod_params(module, modifier, param_keys=None, require_params=True):
    """Temporarily modify the parameters of `module` (zennit.core.mod_params)."""
    try:
        stored_tensors = {}
        if param_keys is None:
            param_keys = [name for name, _ in module.named_parameters(recurse=False)]
        missing = [key for key in param_keys if not hasattr(module, key)]
        if require_params and missing:
            raise RuntimeError("Module {} requires missing parameters: '{}'".format(module, "', '".join(missing)))
        for key in param_keys:
            if key not in missing:
                param = getattr(module, key)
                if param is not None:
                    stored_tensors[key] = param.data
                    param.data = modifier(param.data, key)
        yield module
    finally:
        for key, value in stored_tensors.items():
            getattr(module, key).data = value


def stabilize(input, epsilon=1e-6):
    return input + ((input == 0.).to(input) + input.sign()) * epsilon


class BasicHook:
    def __init__(self, input_modifiers, param_modifiers, output_modifiers, gradient_mapper, reducer, param_keys=None):
        self.input_modifiers = input_modifiers
        self.param_modifiers = param_modifiers
        self.output_modifiers = output_modifiers
        self.gradient_mapper = gradient_mapper
        self.reducer = reducer
        self.param_keys = param_keys
        self.stored_tensors = {}

    def forward(self, module, input, output):
        self.stored_tensors['input'] = input

    def backward(self, module, grad_input, grad_output):
        original_input = self.stored_tensors['input'][0].clone()
        inputs = []
        outputs = []
        for in_mod, param_mod, out_mod in zip(self.input_modifiers, self.param_modifiers, self.output_modifiers):
            input = in_mod(original_input).requires_grad_()
            with mod_params(module, param_mod, param_keys=self.param_keys) as modified, torch.autograd.enable_grad():
                output = modified.forward(input)
                output = out_mod(output)
            inputs.append(input)
            outputs.append(output)
        gradients = torch.autograd.grad(outputs, inputs, grad_outputs=self.gradient_mapper(grad_output[0], outputs))
        relevance = self.reducer(inputs, gradients)
        return tuple(relevance if original.shape == relevance.shape else None for original in grad_input)


class Gamma(BasicHook):
    def __init__(self, gamma=0.25):
        super().__init__(
            input_modifiers=[lambda input: input],
            param_modifiers=[lambda param, _: param + gamma * param.clamp(min=0)],
            output_modifiers=[lambda output: output],
            gradient_mapper=(lambda out_grad, outputs: [out_grad / stabilize(outputs[0])]),
            reducer=(lambda inputs, gradients: inputs[0] * gradients[0]),
        )


if __name__ == "__main__":
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, kernel_size=3, padding=1)
    x = torch.rand(1, 3, 6, 6)
    rule = Gamma(gamma=0.25)

    with torch.no_grad():
        out = conv(x)
    rule.forward(conv, (x,), out)
    grad_output = (torch.ones_like(out),)
    relevance, = rule.backward(conv, (torch.zeros_like(x),), grad_output)

    # what the Gamma rule should give: the gradient taken with the modified weights
    with torch.no_grad():
        w_gamma = conv.weight + 0.25 * conv.weight.clamp(min=0)
        b_gamma = conv.bias + 0.25 * conv.bias.clamp(min=0)
    xin = x.clone().requires_grad_()
    z = nn.functional.conv2d(xin, w_gamma, b_gamma, padding=1)
    g, = torch.autograd.grad(z, xin, grad_outputs=grad_output[0] / stabilize(z.detach()))
    expected = (xin * g).detach()

    # what it actually gives: the gradient of the original weights
    xin2 = x.clone().requires_grad_()
    z_orig = nn.functional.conv2d(xin2, conv.weight.detach(), None, padding=1) + b_gamma.view(1, -1, 1, 1)
    g2, = torch.autograd.grad(z_orig, xin2, grad_outputs=grad_output[0] / stabilize(z.detach()))
    with_original_weights = (xin2 * g2).detach()

    with torch.no_grad():
        diff = (relevance - expected).abs().max().item()
        print("max |relevance - gamma-rule relevance|:", diff)
        assert diff > 1e-3, diff
        assert torch.allclose(relevance, with_original_weights, atol=1e-5)
    print("evidence holds: after the weight.data swap-back the relevance was computed with the original, not the gamma-modified, weights")
