# source: https://github.com/pytorch/pytorch/pull/6929
# category: DL101
# expect: flag 32
# evidence: the first forward equals x @ (W / sigma).T, but the gradient reaching weight_org skips d(W / sigma)/dW (differs from the tracked division) and the parameter itself is divided in place by sigma
import torch
import torch.nn as nn
from torch.nn.functional import normalize


class SpectralNorm(object):
    """Forward pre-hook rescaling a module's weight by its largest singular value."""

    def __init__(self, name='weight', n_power_iterations=1, eps=1e-12):
        self.name = name
        if n_power_iterations <= 0:
            raise ValueError('Expected n_power_iterations to be positive, but '
                             'got n_power_iterations={}'.format(n_power_iterations))
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def compute_weight(self, module):
        weight = module._parameters[self.name + '_org']
        u = module._buffers[self.name + '_u']
        height = weight.size(0)
        weight_mat = weight.view(height, -1)
        for _ in range(self.n_power_iterations):
            # power iteration: u and v approximate the first singular vectors
            v = normalize(torch.matmul(weight_mat.t(), u), dim=0, eps=self.eps)
            u = normalize(torch.matmul(weight_mat, v), dim=0, eps=self.eps)

        sigma = torch.dot(u, torch.matmul(weight_mat, v))
        weight.data /= sigma
        return weight, u

    def __call__(self, module, inputs):
        weight, u = self.compute_weight(module)
        setattr(module, self.name, weight)
        setattr(module, self.name + '_u', u.detach())

    @staticmethod
    def apply(module, name, n_power_iterations, eps):
        fn = SpectralNorm(name, n_power_iterations, eps)
        weight = module._parameters[name]
        height = weight.size(0)
        u = normalize(weight.new_empty(height).normal_(0, 1), dim=0, eps=fn.eps)

        delattr(module, fn.name)
        module.register_parameter(fn.name + "_org", weight)
        module.register_buffer(fn.name + "_u", u)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name='weight', n_power_iterations=1, eps=1e-12):
    SpectralNorm.apply(module, name, n_power_iterations, eps)
    return module


class Discriminator(nn.Module):
    def __init__(self, in_dim=6, hidden=5):
        super(Discriminator, self).__init__()
        self.fc1 = spectral_norm(nn.Linear(in_dim, hidden))
        self.act = nn.LeakyReLU(0.1)
        self.fc2 = spectral_norm(nn.Linear(hidden, 1))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def tracked_reference(w_org, u, bias, x):
    """One power iteration and the division W / sigma, all recorded by autograd."""
    w = w_org.detach().clone().requires_grad_(True)
    v = normalize(torch.matmul(w.t(), u), dim=0, eps=1e-12)
    u = normalize(torch.matmul(w, v), dim=0, eps=1e-12)
    sigma = torch.dot(u, torch.matmul(w, v))
    out = torch.nn.functional.linear(x, w / sigma, bias.detach())
    grad, = torch.autograd.grad(out.pow(2).sum(), w)
    return out.detach(), grad, sigma.detach()


if __name__ == "__main__":
    torch.manual_seed(0)
    D = Discriminator()
    layer = D.fc1
    real = torch.randn(8, 6)

    w_before = layer.weight_org.detach().clone()
    u_before = layer.weight_u.clone()
    ref_out, ref_grad, sigma = tracked_reference(w_before, u_before, layer.bias, real)

    out = layer(real)  # the pre-hook runs, as it does inside D(real)
    out.pow(2).sum().backward()

    assert torch.allclose(out.detach(), ref_out, atol=1e-5), "the forward value is W / sigma in both"
    assert torch.allclose(layer.weight_org.detach(), w_before / sigma, atol=1e-6), "the parameter was divided in place"
    assert not torch.allclose(layer.weight_org.grad, ref_grad, rtol=1e-3, atol=1e-5)
    diff = (layer.weight_org.grad - ref_grad).abs().max().item()

    D.zero_grad()
    D(real).mean().backward()  # the full discriminator still trains without an error
    print("evidence holds: same forward as W / sigma (sigma %.3f), but weight_org.grad differs from the tracked "
          "division (max diff %.3g) and weight_org was overwritten by W / sigma" % (sigma.item(), diff))
