# source: https://github.com/denfed/leaf-audio-pytorch/issues/3
# category: DL201
# expect: flag 55
# evidence: the Gabor kernel (a parameter given to Adam) is only used through values computed under torch.no_grad() in GaborConstraint.forward, so after 100 steps its .grad is None and its values never change while the other LEAF parameters do train
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def gabor_impulse_response(t, center, fwhm):
    denominator = 1.0 / (math.sqrt(2.0 * math.pi) * fwhm)
    gaussian = torch.exp(torch.tensordot(1.0 / (2. * fwhm.unsqueeze(1) ** 2), (-t ** 2.).unsqueeze(0), dims=1))
    center_frequency_complex = center.type(torch.complex64)
    t_complex = t.type(torch.complex64)
    sinusoid = torch.exp(1j * torch.tensordot(center_frequency_complex.unsqueeze(1), t_complex.unsqueeze(0), dims=1))
    denominator = denominator.type(torch.complex64).unsqueeze(1)
    gaussian = gaussian.type(torch.complex64)
    return denominator * sinusoid * gaussian


def gabor_filters(kernel, size=401):
    t = torch.arange(-(size // 2), (size + 1) // 2, dtype=kernel.dtype, device=kernel.device)
    return gabor_impulse_response(t, center=kernel[:, 0], fwhm=kernel[:, 1])


def gabor_init(n_filters, sample_rate=16000, min_freq=60.0, max_freq=7800.0):
    freqs = torch.linspace(min_freq, max_freq, n_filters)
    center = freqs / sample_rate * 2 * math.pi
    fwhm = torch.full((n_filters,), 2.0 * math.sqrt(2 * math.log(2)) * sample_rate / (math.pi * 400.0))
    return torch.stack([center, fwhm], dim=1)


class GaborConstraint(nn.Module):
    """Constraint mu and sigma, in radians.

    Mu is constrained in [0,pi], sigma s.t full-width at half-maximum of the
    gaussian response is in [1,pi/2]. The full-width at half maximum of the
    Gaussian response is 2*sqrt(2*log(2))/sigma . See Section 2.2 of
    https://arxiv.org/pdf/1711.01161.pdf for more details.
    """

    def __init__(self, kernel_size):
        super(GaborConstraint, self).__init__()
        self._kernel_size = kernel_size

    def forward(self, kernel_data):
        mu_lower = 0.
        mu_upper = math.pi
        sigma_lower = 4 * math.sqrt(2 * math.log(2)) / math.pi
        sigma_upper = self._kernel_size * math.sqrt(2 * math.log(2)) / math.pi
        with torch.no_grad():
            clipped_mu = torch.clamp(kernel_data[:, 0], mu_lower, mu_upper).unsqueeze(1)
            clipped_sigma = torch.clamp(kernel_data[:, 1], sigma_lower, sigma_upper).unsqueeze(1)
        return torch.cat([clipped_mu, clipped_sigma], dim=-1)


class GaborConv1D(nn.Module):
    def __init__(self, filters, kernel_size, strides, padding, use_bias, sort_filters=False):
        super(GaborConv1D, self).__init__()
        self._filters = filters // 2
        self._kernel_size = kernel_size
        self._strides = strides
        self._padding = padding
        self._use_bias = use_bias
        self._sort_filters = sort_filters
        self._kernel = nn.Parameter(gabor_init(self._filters))
        self._kernel_constraint = GaborConstraint(self._kernel_size)
        if self._use_bias:
            self._bias = nn.Parameter(torch.zeros(self._filters * 2))

    def forward(self, x):
        kernel = self._kernel_constraint(self._kernel)
        if self._sort_filters:
            filter_order = torch.argsort(kernel[:, 0])
            kernel = torch.gather(kernel, dim=0, index=filter_order.unsqueeze(1).expand(-1, 2))
        filters = gabor_filters(kernel, self._kernel_size)
        real_filters = torch.real(filters)
        img_filters = torch.imag(filters)
        stacked_filters = torch.stack([real_filters, img_filters], dim=1)
        stacked_filters = stacked_filters.view(2 * self._filters, self._kernel_size)
        stacked_filters = stacked_filters.unsqueeze(1)
        output = F.conv1d(x, stacked_filters, bias=self._bias if self._use_bias else None,
                          stride=self._strides, padding=self._padding)
        return output


class SquaredModulus(nn.Module):
    def __init__(self):
        super(SquaredModulus, self).__init__()
        self._pool = nn.AvgPool1d(kernel_size=2, stride=2)

    def forward(self, x):
        x = x.transpose(1, 2)
        output = 2 * self._pool(x ** 2)
        return output.transpose(1, 2)


class GaussianLowpass(nn.Module):
    def __init__(self, in_channels, kernel_size, strides):
        super(GaussianLowpass, self).__init__()
        self.in_channels = in_channels
        self.kernel_size = kernel_size
        self.strides = strides
        self.weights = nn.Parameter(torch.full((1, 1, in_channels, 1), 0.4))

    def forward(self, x):
        t = torch.arange(0, self.kernel_size, dtype=x.dtype)
        t = t.view(1, 1, 1, -1)
        denominator = self.weights * 0.5 * (self.kernel_size - 1)
        kernel = torch.exp(-0.5 * ((t - 0.5 * (self.kernel_size - 1)) / denominator) ** 2)
        kernel = kernel.view(self.in_channels, 1, self.kernel_size)
        return F.conv1d(x, kernel, stride=self.strides, groups=self.in_channels, padding=self.kernel_size // 2)


class Leaf(nn.Module):
    """Pytorch layer that implements time-domain filterbanks (tiny LEAF frontend)."""

    def __init__(self, n_filters=8, window_len=5.0, window_stride=2.5, sample_rate=1600):
        super(Leaf, self).__init__()
        window_size = int(sample_rate * window_len // 1000 + 1)
        window_stride = int(sample_rate * window_stride // 1000)
        self._complex_conv = GaborConv1D(filters=2 * n_filters, kernel_size=window_size, strides=1,
                                         padding=window_size // 2, use_bias=False, sort_filters=False)
        self._activation = SquaredModulus()
        self._pooling = GaussianLowpass(n_filters, kernel_size=window_size, strides=window_stride)

    def forward(self, x):
        outputs = x.unsqueeze(1) if x.dim() < 3 else x
        outputs = self._complex_conv(outputs)
        outputs = self._activation(outputs)
        outputs = self._pooling(outputs)
        outputs = torch.maximum(outputs, torch.tensor(1e-5))
        outputs = torch.log(outputs + 1e-6)
        return outputs


device = torch.device("cpu")
a = Leaf().to(device)

## A random input that is like an audio waveform
x = torch.rand(1, 1, 800)

a.train()
kernel_before = a._complex_conv._kernel.detach().clone()
pooling_before = a._pooling.weights.detach().clone()
opt = torch.optim.Adam(a.parameters(), lr=0.002, betas=(0.9, 0.999), eps=1e-08, weight_decay=1e-6, amsgrad=True)
for _ in range(20):
    b = a(x)

    ## Ground truth for the output for leaf module
    b_gt = torch.ones_like(b)

    loss = torch.norm((b - b_gt).view(1, -1), p=2, dim=-1)
    opt.zero_grad()
    loss.backward()
    opt.step()

if __name__ == "__main__":
    kernel_after = a._complex_conv._kernel.detach()
    pooling_after = a._pooling.weights.detach()
    assert a._complex_conv._kernel.grad is None
    assert torch.equal(kernel_before, kernel_after)
    assert not torch.equal(pooling_before, pooling_after)
    print("evidence holds: after 20 Adam steps the Gabor _kernel has grad None and is unchanged, "
          "while the pooling weights moved by %.4f" % (pooling_after - pooling_before).abs().max().item())
