# source: https://github.com/somuchtome/SimAC/issues/3
# category: DL202
# expect: flag 182
# evidence: the images returned by pgd_attack equal those of a replayed attack that uses only the noise-prediction loss, although the feature (target) loss has a non-zero gradient: the .item() term is a constant and contributes nothing.
import torch
import torch.nn as nn
import torch.nn.functional as F


class SchedulerConfig:
    prediction_type = "epsilon"


class DDPMScheduler:
    def __init__(self, num_train_timesteps=1000):
        self.config = SchedulerConfig()
        betas = torch.linspace(1e-4, 0.02, num_train_timesteps)
        self.alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)

    def add_noise(self, latents, noise, timesteps):
        a = self.alphas_cumprod[timesteps].view(-1, 1, 1, 1)
        return a.sqrt() * latents + (1 - a).sqrt() * noise


class LatentDist:
    def __init__(self, mean):
        self.mean = mean

    def sample(self):
        return self.mean


class EncoderOutput:
    def __init__(self, mean):
        self.latent_dist = LatentDist(mean)


class AutoencoderKL(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.config = type("cfg", (), {"scaling_factor": 0.18215})()

    def encode(self, x):
        return EncoderOutput(self.encoder(x))


class ResnetBlock2D(nn.Module):
    def __init__(self, ch, temb_ch):
        super().__init__()
        self.norm1 = nn.GroupNorm(2, ch)
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.time_emb_proj = nn.Linear(temb_ch, ch)
        self.norm2 = nn.GroupNorm(2, ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)
        self.nonlinearity = nn.SiLU()
        self.output_scale_factor = 1.0

    def forward(self, input_tensor, temb):
        h = self.conv1(self.nonlinearity(self.norm1(input_tensor)))
        h = h + self.time_emb_proj(self.nonlinearity(temb))[:, :, None, None]
        h = self.conv2(self.nonlinearity(self.norm2(h)))
        return (input_tensor + h) / self.output_scale_factor


class Block(nn.Module):
    def __init__(self, n, ch, temb_ch):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock2D(ch, temb_ch) for _ in range(n)])

    def forward(self, h, temb):
        for r in self.resnets:
            h = r(h, temb)
        return h


class UNetOutput:
    def __init__(self, sample):
        self.sample = sample


class UNet2DConditionModel(nn.Module):
    def __init__(self, ch=4, temb_ch=8):
        super().__init__()
        self.conv_in = nn.Conv2d(4, ch, 3, padding=1)
        self.time_embedding = nn.Embedding(1000, temb_ch)
        self.cond_proj = nn.Linear(6, temb_ch)
        self.down_blocks = nn.ModuleList([Block(2, ch, temb_ch) for _ in range(4)])
        self.up_blocks = nn.ModuleList([Block(3, ch, temb_ch) for _ in range(4)])
        self.conv_out = nn.Conv2d(ch, 4, 3, padding=1)

    def forward(self, sample, timesteps, encoder_hidden_states):
        temb = self.time_embedding(timesteps) + self.cond_proj(encoder_hidden_states.mean(dim=1))
        h = self.conv_in(sample)
        for b in self.down_blocks:
            h = b(h, temb)
        for b in self.up_blocks:
            h = b(h, temb)
        return UNetOutput(self.conv_out(h))


class TextEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 6)

    def forward(self, input_ids):
        return (self.emb(input_ids),)


def set_unet_attr(unet):
    def conv_forward(self):
        def forward(input_tensor, temb):
            hidden_states = input_tensor
            hidden_states = self.norm1(hidden_states)
            hidden_states = self.nonlinearity(hidden_states)
            hidden_states = self.conv1(hidden_states)
            if temb is not None:
                temb = self.time_emb_proj(self.nonlinearity(temb))[:, :, None, None]
                hidden_states = hidden_states + temb
            hidden_states = self.norm2(hidden_states)
            hidden_states = self.nonlinearity(hidden_states)
            hidden_states = self.conv2(hidden_states)
            self.out_layers_features = hidden_states
            output_tensor = (input_tensor + hidden_states) / self.output_scale_factor
            return output_tensor

        return forward

    conv_module_list = [r for b in unet.up_blocks for r in b.resnets] + [r for b in unet.down_blocks for r in b.resnets]
    for conv_module in conv_module_list:
        conv_module.forward = conv_forward(conv_module)
        setattr(conv_module, "in_layers_features", None)
        setattr(conv_module, "out_layers_features", None)


def save_feature_maps(up_blocks, down_blocks):
    out_layers_features_list_3 = []
    block_idx = 0
    for block in up_blocks:
        if block_idx == 3:
            for index in [0, 1, 2]:
                out_layers_features_list_3.append(block.resnets[index].out_layers_features)
        block_idx += 1
    out_layers_features_list_3 = torch.stack(out_layers_features_list_3, dim=0)
    return out_layers_features_list_3


def pgd_attack(args, models, noise_scheduler, vae, data_tensor, original_images, input_ids, num_steps, time_list):
    """Return new perturbed data"""
    unet, text_encoder = models
    set_unet_attr(unet)

    perturbed_images = data_tensor.detach().clone()
    perturbed_images.requires_grad_(True)

    for step in range(num_steps):
        perturbed_images.requires_grad = True
        latents = vae.encode(perturbed_images).latent_dist.sample()
        latents = latents * vae.config.scaling_factor
        noise = torch.randn_like(latents)
        timesteps = torch.cat([torch.LongTensor([time_list[i][step % len(time_list[i])]]) for i in range(len(data_tensor))])
        noisy_latents = noise_scheduler.add_noise(latents, noise, timesteps)
        encoder_hidden_states = text_encoder(input_ids)[0]
        model_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample
        if noise_scheduler.config.prediction_type == "epsilon":
            target = noise
        else:
            raise ValueError("Unknown prediction type")
        # feature loss
        noise_out_layers_features_3 = save_feature_maps(unet.up_blocks, unet.down_blocks)
        with torch.no_grad():
            clean_latents = vae.encode(data_tensor).latent_dist.sample()
            clean_latents = clean_latents * vae.config.scaling_factor
            noisy_clean_latents = noise_scheduler.add_noise(clean_latents, noise, timesteps)
            clean_model_pred = unet(noisy_clean_latents, timesteps, encoder_hidden_states).sample
            clean_out_layers_features_3 = save_feature_maps(unet.up_blocks, unet.down_blocks)
        target_loss = F.mse_loss(noise_out_layers_features_3.float(), clean_out_layers_features_3.float(), reduction="mean")
        unet.zero_grad()
        text_encoder.zero_grad()
        loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
        loss = loss + target_loss.detach().item()
        loss.backward()
        alpha = args["pgd_alpha"]
        eps = args["pgd_eps"] / 255
        adv_images = perturbed_images + alpha * perturbed_images.grad.sign()
        eta = torch.clamp(adv_images - original_images, min=-eps, max=+eps)
        perturbed_images = torch.clamp(original_images + eta, min=-1, max=+1).detach_()
    return perturbed_images


if __name__ == "__main__":
    torch.manual_seed(0)
    args = {"pgd_alpha": 0.005, "pgd_eps": 16}
    vae, unet, text_encoder = AutoencoderKL(), UNet2DConditionModel(), TextEncoder()
    vae.requires_grad_(False)
    noise_scheduler = DDPMScheduler()
    clean = torch.rand(2, 3, 8, 8) * 2 - 1
    # start from an already perturbed image so that the feature loss is non-zero
    data_tensor = (clean + 0.05 * torch.randn_like(clean)).clamp(-1, 1)
    input_ids = torch.randint(0, 50, (2, 5))
    time_list = [[100, 400], [250, 700]]

    torch.manual_seed(1)
    result = pgd_attack(args, [unet, text_encoder], noise_scheduler, vae, data_tensor, clean, input_ids, 3, time_list)

    # check: replay the same 3 PGD steps using only the noise-prediction loss,
    # and measure the feature loss gradient that the attack should have used
    torch.manual_seed(1)
    eps = args["pgd_eps"] / 255
    x = data_tensor.detach().clone()
    feat_grad_norms = []
    for step in range(3):
        x = x.detach().requires_grad_(True)
        lat = vae.encode(x).latent_dist.sample() * vae.config.scaling_factor
        noise = torch.randn_like(lat)
        ts = torch.LongTensor([time_list[i][step % 2] for i in range(2)])
        pred = unet(noise_scheduler.add_noise(lat, noise, ts), ts, text_encoder(input_ids)[0]).sample
        feat = save_feature_maps(unet.up_blocks, unet.down_blocks)
        with torch.no_grad():
            clat = vae.encode(data_tensor).latent_dist.sample() * vae.config.scaling_factor
            unet(noise_scheduler.add_noise(clat, noise, ts), ts, text_encoder(input_ids)[0])
            cfeat = save_feature_maps(unet.up_blocks, unet.down_blocks)
        g_noise = torch.autograd.grad(F.mse_loss(pred, noise), x, retain_graph=True)[0]
        g_feat = torch.autograd.grad(F.mse_loss(feat, cfeat), x)[0]
        feat_grad_norms.append(g_feat.abs().sum().item())
        with torch.no_grad():
            x = torch.clamp(clean + torch.clamp(x + args["pgd_alpha"] * g_noise.sign() - clean, -eps, eps), -1, 1)
    assert max(feat_grad_norms) > 0
    assert torch.allclose(result, x, atol=1e-6)
    print("evidence holds: the 3-step PGD result equals a noise-loss-only attack; the feature loss added via .item() (non-zero gradient) has no effect")
