# source: https://github.com/facebookresearch/nwm/issues/16
# category: DL601
# expect: flag 54, 55, 81
# evidence: with bfloat16 enabled, the gradient each AdamW step applies is the sum over all previous steps; the fp32 path applies only the current one
from collections import OrderedDict
from copy import deepcopy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_pre_hook


class CDiT(nn.Module):
    """Stand-in for the conditional diffusion transformer: predicts the noise."""

    def __init__(self, dim=8, cond_dim=3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + cond_dim + 1, 32), nn.SiLU(), nn.Linear(32, dim))

    def forward(self, x, t, y):
        return self.net(torch.cat([x, y, t.float().unsqueeze(1) / 1000.0], dim=1))


class GaussianDiffusion:
    def __init__(self, num_timesteps=1000):
        betas = torch.linspace(1e-4, 0.02, num_timesteps)
        self.alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        self.num_timesteps = num_timesteps

    def training_losses(self, model, x_start, t, model_kwargs):
        noise = torch.randn_like(x_start)
        a = self.alphas_cumprod[t].unsqueeze(1)
        x_t = a.sqrt() * x_start + (1 - a).sqrt() * noise
        model_output = model(x_t, t, **model_kwargs)
        return {"loss": F.mse_loss(model_output.float(), noise, reduction="none").mean(dim=1)}


@torch.no_grad()
def update_ema(ema_model, model, decay=0.9999):
    ema_params = OrderedDict(ema_model.named_parameters())
    model_params = OrderedDict(model.named_parameters())
    for name, param in model_params.items():
        ema_params[name].mul_(decay).add_(param.data, alpha=1 - decay)


def train_step(model, ema, opt, diffusion, x, y, bfloat_enable):
    t = torch.randint(0, diffusion.num_timesteps, (x.shape[0],))
    model_kwargs = dict(y=y)
    if bfloat_enable:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss_dict = diffusion.training_losses(model, x, t, model_kwargs)
            loss = loss_dict["loss"].mean()
        loss.backward()
        opt.step()
    else:
        loss_dict = diffusion.training_losses(model, x, t, model_kwargs)
        loss = loss_dict["loss"].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    update_ema(ema, model)
    return loss.item()


def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag


def main(loader, bfloat16=True, seed=0):
    torch.manual_seed(seed)
    model = CDiT()
    ema = deepcopy(model)
    requires_grad(ema, False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0)
    diffusion = GaussianDiffusion()
    model.train()
    ema.eval()
    running_loss = 0
    for x, y in loader:
        running_loss += train_step(model, ema, opt, diffusion, x, y, bfloat_enable=bfloat16)
    return model, running_loss / len(loader)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = [(torch.randn(16, 8), torch.randn(16, 3)) for _ in range(5)]

    for bf16, accumulates in ((True, True), (False, False)):
        fresh, seen = [], []
        installed = []

        def pre_step(opt, args, kwargs):
            w = opt.param_groups[0]["params"][0]
            seen.append(w.grad.detach().clone())
            if not installed:  # first step: the grad is the first batch's own gradient
                fresh.append(seen[0])
                installed.append(w.register_hook(lambda g: fresh.append(g.detach().clone())))

        handle = register_optimizer_step_pre_hook(pre_step)
        main(loader, bfloat16=bf16)
        handle.remove()

        assert len(seen) == len(fresh) == len(loader)
        for k in range(len(seen)):
            expected = torch.stack(fresh[: k + 1]).sum(0) if accumulates else fresh[k]
            assert torch.allclose(seen[k], expected, atol=1e-5), (bf16, k)
        if accumulates:
            assert not torch.allclose(seen[-1], fresh[-1], atol=1e-5)
    print("evidence holds: the bfloat16 branch never zeroes, so its steps apply accumulated gradients; the fp32 branch does not")
