# source: https://github.com/VideoVerses/VideoTuna/issues/13
# category: DL201
# expect: flag 55
# evidence: with cond_stage_trainable=True the text encoder is in the optimizer, but get_batch_input() runs under @torch.no_grad(), so its parameters get grad None and never change.
import torch
import torch.nn as nn
import torch.nn.functional as F


class FrozenOpenCLIPEmbedderLike(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens):
        return self.proj(self.token_embedding(tokens))

    def encode(self, tokens):
        return self(tokens)


class TinyUNet(nn.Module):
    def __init__(self, channels=4, ctx_dim=16):
        super().__init__()
        self.inp = nn.Conv2d(channels, 8, 3, padding=1)
        self.ctx = nn.Linear(ctx_dim, 8)
        self.out = nn.Conv2d(8, channels, 3, padding=1)

    def forward(self, x, t, context):
        h = F.silu(self.inp(x)) + self.ctx(context.mean(1))[:, :, None, None] + t[:, None, None, None] / 1000.0
        return self.out(F.silu(h))


class LatentDiffusion(nn.Module):
    def __init__(self, cond_stage_trainable=True, num_timesteps=1000, learning_rate=1e-3):
        super().__init__()
        self.model = TinyUNet()
        self.cond_stage_model = FrozenOpenCLIPEmbedderLike()
        self.cond_stage_trainable = cond_stage_trainable
        self.num_timesteps = num_timesteps
        self.learning_rate = learning_rate
        betas = torch.linspace(1e-4, 2e-2, num_timesteps)
        alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        self.register_buffer("sqrt_alphas_cumprod", alphas_cumprod.sqrt())
        self.register_buffer("sqrt_one_minus_alphas_cumprod", (1.0 - alphas_cumprod).sqrt())
        self.optimizer = self.configure_optimizers()

    def get_learned_conditioning(self, c):
        return self.cond_stage_model.encode(c)

    def get_first_stage_encoding(self, video):
        return video  # latents are given directly in this example

    @torch.no_grad()
    def get_batch_input(self, batch, random_uncond=False):
        x = self.get_first_stage_encoding(batch["video"])
        cond = batch["caption"]
        if isinstance(cond, dict) or isinstance(cond, list):
            cond_emb = self.get_learned_conditioning(cond)
        else:
            cond_emb = self.get_learned_conditioning(cond.to(x.device))
        return x, cond_emb

    def q_sample(self, x_start, t, noise):
        return (self.sqrt_alphas_cumprod[t][:, None, None, None] * x_start
                + self.sqrt_one_minus_alphas_cumprod[t][:, None, None, None] * noise)

    def p_losses(self, x_start, cond, t):
        noise = torch.randn_like(x_start)
        x_noisy = self.q_sample(x_start, t, noise)
        model_output = self.model(x_noisy, t, cond)
        return F.mse_loss(model_output, noise)

    def forward(self, x, c):
        t = torch.randint(0, self.num_timesteps, (x.shape[0],), device=x.device).long()
        return self.p_losses(x, c, t)

    def shared_step(self, batch):
        x, c = self.get_batch_input(batch, random_uncond=False)
        return self(x, c)

    def training_step(self, batch, batch_idx):
        loss = self.shared_step(batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.last_cond_grads = [p.grad for p in self.cond_stage_model.parameters()]
        self.optimizer.step()
        return loss

    def configure_optimizers(self):
        params = list(self.model.parameters())
        if self.cond_stage_trainable:
            params = params + list(self.cond_stage_model.parameters())
        return torch.optim.AdamW(params, lr=self.learning_rate)


if __name__ == "__main__":
    torch.manual_seed(0)
    ldm = LatentDiffusion(cond_stage_trainable=True)
    batches = [{"video": torch.randn(2, 4, 8, 8), "caption": torch.randint(0, 50, (2, 6))} for _ in range(4)]
    text_before = [p.detach().clone() for p in ldm.cond_stage_model.parameters()]
    unet_before = [p.detach().clone() for p in ldm.model.parameters()]
    for i, batch in enumerate(batches):
        loss = ldm.training_step(batch, i)
        assert all(g is None for g in ldm.last_cond_grads)
    with torch.no_grad():
        assert all(torch.equal(a, p) for a, p in zip(text_before, ldm.cond_stage_model.parameters()))
        assert any(not torch.equal(a, p) for a, p in zip(unet_before, ldm.model.parameters()))
    print("evidence holds: the trainable text encoder gets grad None under @torch.no_grad() get_batch_input and never changes")
