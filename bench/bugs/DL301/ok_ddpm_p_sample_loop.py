# source: https://github.com/lucidrains/denoising-diffusion-pytorch/blob/main/denoising_diffusion_pytorch/denoising_diffusion_pytorch.py
# category: DL301
# expect: clean
# evidence: the sampling loop calls the denoiser once per timestep but sample/p_sample_loop/p_sample are decorated with @torch.inference_mode(), so the returned images carry no graph.
import math
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


def extract(a, t, x_shape):
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x_shape) - 1)))


def linear_beta_schedule(timesteps):
    scale = 1000 / timesteps
    beta_start = scale * 0.0001
    beta_end = scale * 0.02
    return torch.linspace(beta_start, beta_end, timesteps, dtype=torch.float64)


def unnormalize_to_zero_to_one(t):
    return (t + 1) * 0.5


def tqdm(it, desc=None, total=None):
    return it


class Unet(nn.Module):
    def __init__(self, dim, channels=3):
        super().__init__()
        self.channels = channels
        self.self_condition = False
        self.time_mlp = nn.Sequential(nn.Linear(1, dim), nn.SiLU())
        self.inp = nn.Conv2d(channels, dim, 3, padding=1)
        self.out = nn.Conv2d(dim, channels, 3, padding=1)

    def forward(self, x, time, x_self_cond=None):
        t = self.time_mlp(time.float().unsqueeze(-1) / 1000.)
        h = self.inp(x) + t[:, :, None, None]
        return self.out(F.silu(h))


class GaussianDiffusion(nn.Module):
    def __init__(self, model, *, image_size, timesteps=1000):
        super().__init__()
        self.model = model
        self.channels = self.model.channels
        self.self_condition = self.model.self_condition
        self.image_size = image_size

        betas = linear_beta_schedule(timesteps)
        alphas = 1. - betas
        alphas_cumprod = torch.cumprod(alphas, dim=0)
        alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.)
        self.num_timesteps = int(betas.shape[0])

        register_buffer = lambda name, val: self.register_buffer(name, val.to(torch.float32))
        register_buffer('betas', betas)
        register_buffer('alphas_cumprod', alphas_cumprod)
        register_buffer('sqrt_recip_alphas_cumprod', torch.sqrt(1. / alphas_cumprod))
        register_buffer('sqrt_recipm1_alphas_cumprod', torch.sqrt(1. / alphas_cumprod - 1))
        posterior_variance = betas * (1. - alphas_cumprod_prev) / (1. - alphas_cumprod)
        register_buffer('posterior_log_variance_clipped', torch.log(posterior_variance.clamp(min=1e-20)))
        register_buffer('posterior_mean_coef1', betas * torch.sqrt(alphas_cumprod_prev) / (1. - alphas_cumprod))
        register_buffer('posterior_mean_coef2', (1. - alphas_cumprod_prev) * torch.sqrt(alphas) / (1. - alphas_cumprod))
        self.unnormalize = unnormalize_to_zero_to_one

    @property
    def device(self):
        return self.betas.device

    def predict_start_from_noise(self, x_t, t, noise):
        return (
            extract(self.sqrt_recip_alphas_cumprod, t, x_t.shape) * x_t -
            extract(self.sqrt_recipm1_alphas_cumprod, t, x_t.shape) * noise
        )

    def q_posterior(self, x_start, x_t, t):
        posterior_mean = (
            extract(self.posterior_mean_coef1, t, x_t.shape) * x_start +
            extract(self.posterior_mean_coef2, t, x_t.shape) * x_t
        )
        posterior_log_variance_clipped = extract(self.posterior_log_variance_clipped, t, x_t.shape)
        return posterior_mean, posterior_log_variance_clipped

    def p_mean_variance(self, x, t, x_self_cond=None, clip_denoised=True):
        pred_noise = self.model(x, t, x_self_cond)
        x_start = self.predict_start_from_noise(x, t, pred_noise)
        if clip_denoised:
            x_start.clamp_(-1., 1.)
        model_mean, posterior_log_variance = self.q_posterior(x_start=x_start, x_t=x, t=t)
        return model_mean, posterior_log_variance, x_start

    @torch.inference_mode()
    def p_sample(self, x, t: int, x_self_cond=None):
        b, *_, device = *x.shape, self.device
        batched_times = torch.full((b,), t, device=device, dtype=torch.long)
        model_mean, model_log_variance, x_start = self.p_mean_variance(x=x, t=batched_times, x_self_cond=x_self_cond, clip_denoised=True)
        noise = torch.randn_like(x) if t > 0 else 0.  # no noise if t == 0
        pred_img = model_mean + (0.5 * model_log_variance).exp() * noise
        return pred_img, x_start

    @torch.inference_mode()
    def p_sample_loop(self, shape, return_all_timesteps=False):
        batch, device = shape[0], self.device

        img = torch.randn(shape, device=device)
        imgs = [img]

        x_start = None

        for t in tqdm(reversed(range(0, self.num_timesteps)), desc='sampling loop time step', total=self.num_timesteps):
            self_cond = x_start if self.self_condition else None
            img, x_start = self.p_sample(img, t, self_cond)
            imgs.append(img)

        ret = img if not return_all_timesteps else torch.stack(imgs, dim=1)

        ret = self.unnormalize(ret)
        return ret

    @torch.inference_mode()
    def sample(self, batch_size=16, return_all_timesteps=False):
        image_size, channels = self.image_size, self.channels
        sample_fn = self.p_sample_loop
        return sample_fn((batch_size, channels, image_size, image_size), return_all_timesteps=return_all_timesteps)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Unet(dim=8, channels=3)
    diffusion = GaussianDiffusion(model, image_size=8, timesteps=20)

    sampled_images = diffusion.sample(batch_size=2, return_all_timesteps=True)

    assert sampled_images.shape == (2, 21, 3, 8, 8)
    assert sampled_images.grad_fn is None and not sampled_images.requires_grad
    assert torch.is_grad_enabled()
    print("evidence holds: 20 denoising steps ran under inference_mode; the sampled images carry no graph")
