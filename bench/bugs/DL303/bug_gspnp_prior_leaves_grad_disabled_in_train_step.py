# source: https://github.com/deepinv/deepinv/issues/166
# category: DL303
# expect: flag 48, 85
# evidence: the gradient-step denoiser switches autograd off globally (torch.set_grad_enabled(False)) inside its forward, so the rest of the unrolled training step runs with grad disabled and loss.backward() raises; the learned step size never trains.
import torch
import torch.nn as nn


class TinyDRUNet(nn.Module):
    def __init__(self, in_channels=1, out_channels=1, nc=8):
        super().__init__()
        self.head = nn.Conv2d(in_channels + 1, nc, 3, padding=1)
        self.tail = nn.Conv2d(nc, out_channels, 3, padding=1)

    def forward(self, x, sigma):
        noise_level_map = torch.full_like(x[:, :1], float(sigma))
        return self.tail(torch.relu(self.head(torch.cat((x, noise_level_map), 1))))


class StudentGrad(nn.Module):
    def __init__(self, denoiser):
        super().__init__()
        self.model = denoiser

    def forward(self, x, sigma):
        return self.model(x, sigma)


class GSPnP(nn.Module):
    """Gradient Step module to use a denoiser architecture as a Gradient Step Denoiser."""

    def __init__(self, denoiser, train=False):
        super().__init__()
        self.student_grad = StudentGrad(denoiser)
        self.train = train

    def potential(self, x, sigma):
        N = self.student_grad(x, sigma)
        return 0.5 * torch.norm(x - N) ** 2

    def potential_grad(self, x, sigma):
        torch.set_grad_enabled(True)
        x = x.float()
        x = x.requires_grad_()
        N = self.student_grad(x, sigma)
        JN = torch.autograd.grad(N, x, grad_outputs=x - N, create_graph=True, only_inputs=True)[0]
        if not self.train:
            torch.set_grad_enabled(False)
        Dg = x - N - JN
        return Dg

    def forward(self, x, sigma):
        Dg = self.potential_grad(x, sigma)
        x_hat = x - Dg
        return x_hat


def GSDRUNet(in_channels=1, out_channels=1):
    return GSPnP(TinyDRUNet(in_channels, out_channels))


class UnrolledPGD(nn.Module):
    """Unrolled proximal-gradient scheme with a learned step size and a fixed GS-DRUNet prior."""

    def __init__(self, denoiser, n_iter=2, sigma_denoiser=0.05):
        super().__init__()
        self.denoiser = denoiser
        self.n_iter = n_iter
        self.sigma_denoiser = sigma_denoiser
        self.stepsize = nn.Parameter(torch.tensor(0.5))

    def forward(self, y, physics_A, physics_At):
        x = physics_At(y)
        for _ in range(self.n_iter):
            x = x - self.stepsize * physics_At(physics_A(x) - y)
            x = self.denoiser(x, self.sigma_denoiser)
        return x


def train_step(model, optimizer, x_true, physics_A, physics_At):
    y = physics_A(x_true) + 0.01 * torch.randn_like(x_true)
    x_hat = model(y, physics_A, physics_At)
    loss = nn.functional.mse_loss(x_hat, x_true)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    blur = nn.Conv2d(1, 1, 3, padding=1, bias=False)
    with torch.no_grad():
        blur.weight.fill_(1.0 / 9)
    blur.requires_grad_(False)
    physics_A = blur
    physics_At = blur  # symmetric kernel

    denoiser = GSDRUNet()
    denoiser.requires_grad_(False)  # pretrained prior, only the step size is learned
    model = UnrolledPGD(denoiser)
    optimizer = torch.optim.Adam([model.stepsize], lr=1e-2)
    x_true = torch.rand(2, 1, 8, 8)
    step_before = model.stepsize.item()

    assert torch.is_grad_enabled()
    try:
        train_step(model, optimizer, x_true, physics_A, physics_At)
    except RuntimeError as e:
        msg = str(e)
    else:
        raise AssertionError("expected backward to fail")
    grad_left_off = not torch.is_grad_enabled()
    torch.set_grad_enabled(True)

    assert "does not require grad" in msg, msg
    assert grad_left_off
    assert model.stepsize.grad is None and model.stepsize.item() == step_before
    print("evidence holds: after the denoiser call torch.is_grad_enabled() was False, loss.backward() "
          "raised '%s' and the learned step size stayed %.2f" % (msg.splitlines()[0], step_before))
