# source: https://github.com/huggingface/accelerate/issues/2251
# category: DL206
# expect: flag 75, 76
# evidence: t.to(batch.device) / weights.to(batch.device) results are thrown away, t stays on the CPU and the training step fails with a device-mismatch RuntimeError (the 'meta' device stands in for the GPU).
import numpy as np
import torch as th
import torch.nn as nn


class UniformSampler:
    def __init__(self, num_timesteps):
        self._weights = np.ones([num_timesteps])

    def weights(self):
        return self._weights

    def sample(self, batch_size):
        w = self.weights()
        p = w / np.sum(w)
        indices_np = np.random.choice(len(p), size=(batch_size,), p=p)
        indices = th.from_numpy(indices_np).long()
        weights_np = 1 / (len(p) * p[indices_np])
        weights = th.from_numpy(weights_np).float()
        return indices, weights


def _extract_into_tensor(arr, timesteps, broadcast_shape):
    res = th.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
    while len(res.shape) < len(broadcast_shape):
        res = res[..., None]
    return res.expand(broadcast_shape)


class GaussianDiffusion:
    def __init__(self, num_timesteps=100):
        betas = np.linspace(1e-4, 0.02, num_timesteps)
        alphas_cumprod = np.cumprod(1.0 - betas)
        self.sqrt_alphas_cumprod = np.sqrt(alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - alphas_cumprod)

    def q_sample(self, x_start, t, noise):
        return (_extract_into_tensor(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                + _extract_into_tensor(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise)

    def training_losses(self, model, x_start, t, model_kwargs=None):
        noise = th.randn_like(x_start)
        x_t = self.q_sample(x_start, t, noise=noise)
        model_output = model(x_t, t, **(model_kwargs or {}))
        return {"loss": ((noise - model_output) ** 2).mean(dim=list(range(1, len(x_start.shape))))}


class TinyUNet(nn.Module):
    def __init__(self, channels=3):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x, timesteps):
        return self.conv(x) + timesteps.float().view(-1, 1, 1, 1) / 1000.0


class TrainLoop:
    def __init__(self, model, diffusion, schedule_sampler, lr=1e-4):
        self.model = model
        self.diffusion = diffusion
        self.schedule_sampler = schedule_sampler
        self.opt = th.optim.AdamW(self.model.parameters(), lr=lr)

    def run_step(self, batch, cond):
        self.forward_backward(batch, cond)
        self.opt.step()

    def forward_backward(self, batch, cond):
        self.opt.zero_grad()
        t, weights = self.schedule_sampler.sample(batch.shape[0])
        t.to(batch.device)
        weights.to(batch.device)
        self.last_t = t
        losses = self.diffusion.training_losses(self.model, batch, t, model_kwargs=cond)
        loss = (losses["loss"] * weights).mean()
        loss.backward()


if __name__ == "__main__":
    th.manual_seed(0)
    np.random.seed(0)
    device = th.device("meta")  # stands in for the accelerator's cuda device
    model = TinyUNet().to(device)
    loop = TrainLoop(model, GaussianDiffusion(), UniformSampler(100))
    batch = th.randn(4, 3, 8, 8).to(device)
    try:
        loop.run_step(batch, {})
    except RuntimeError as e:
        print("RuntimeError:", e)
        assert "device" in str(e)
    else:
        raise AssertionError("expected a device mismatch")
    assert loop.last_t.device.type == "cpu"
    print("evidence holds: the discarded .to(batch.device) leaves t/weights on the CPU and the step fails on device mismatch")
