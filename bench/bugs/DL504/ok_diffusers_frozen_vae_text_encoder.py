# source: https://github.com/huggingface/diffusers/blob/main/examples/text_to_image/train_text_to_image.py
# category: DL504
# expect: clean
# evidence: vae.requires_grad_(False) and text_encoder.requires_grad_(False) act on module parameters (leaves): no error, the frozen modules get no gradient and the unet trains
import torch
import torch.nn as nn
import torch.nn.functional as F


class AutoencoderKL(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv2d(3, 4, 3, padding=1)

    def encode(self, pixel_values):
        return self.encoder(pixel_values)


class TextEncoder(nn.Module):
    def __init__(self, vocab=20, dim=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)

    def forward(self, input_ids):
        return self.embed(input_ids).mean(1)


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.cond = nn.Linear(4, 4)

    def forward(self, noisy_latents, timesteps, encoder_hidden_states):
        return self.conv(noisy_latents) + self.cond(encoder_hidden_states)[:, :, None, None]


def main(batches, vae_scaling_factor=0.18215):
    vae, text_encoder, unet = AutoencoderKL(), TextEncoder(), UNet()
    vae.requires_grad_(False)
    text_encoder.requires_grad_(False)
    unet.train()
    unet_start = unet.conv.weight.detach().clone()
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-2)
    for batch in batches:
        latents = vae.encode(batch["pixel_values"]) * vae_scaling_factor
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, 1000, (latents.shape[0],))
        noisy_latents = latents + noise
        encoder_hidden_states = text_encoder(batch["input_ids"])
        model_pred = unet(noisy_latents, timesteps, encoder_hidden_states)
        loss = F.mse_loss(model_pred.float(), noise.float(), reduction="mean")
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return vae, text_encoder, unet, unet_start


if __name__ == "__main__":
    torch.manual_seed(0)
    batches = [{"pixel_values": torch.randn(2, 3, 8, 8), "input_ids": torch.randint(0, 20, (2, 5))} for _ in range(2)]
    vae, text_encoder, unet, unet_start = main(batches)
    assert not torch.equal(unet_start, unet.conv.weight.detach())
    assert all(p.grad is None and not p.requires_grad for p in vae.parameters())
    assert all(p.grad is None and not p.requires_grad for p in text_encoder.parameters())
    print("evidence holds: requires_grad_(False) on the frozen modules works; only the unet is optimised")
