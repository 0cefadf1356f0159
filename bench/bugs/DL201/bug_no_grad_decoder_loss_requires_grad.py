# source: https://stackoverflow.com/questions/74816476/pytorch-how-to-train-model-with-loss-that-dont-return-gradient
# category: DL201
# expect: flag 49, 52
# evidence: the decoder call is wrapped in torch.no_grad() so the L1 loss has no path back to the transformer; with loss.requires_grad = True backward runs, but every transformer parameter keeps grad None and Adam never changes it.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Encoder(nn.Module):
    """Pretrained audio encoder (frozen): waveform frames -> latent."""

    def __init__(self, frame=16, latent=8):
        super().__init__()
        self.proj = nn.Linear(frame, latent)

    def forward(self, wav):
        return self.proj(wav)


class Decoder(nn.Module):
    """Pretrained audio decoder (frozen, too heavy to backprop through)."""

    def __init__(self, frame=16, latent=8):
        super().__init__()
        self.proj = nn.Linear(latent, frame)

    def forward(self, z):
        return torch.tanh(self.proj(z))


class Enhancer(nn.Module):
    def __init__(self, latent=8):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=latent, nhead=2, dim_feedforward=16, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, num_layers=1)

    def forward(self, z):
        return self.transformer(z)


def train_step(encoder, model, decoder, optimizer, noisy):
    optimizer.zero_grad()
    with torch.no_grad():
        latent = encoder(noisy)
    enhanced_latent = model(latent)
    with torch.no_grad():
        denoised = decoder(enhanced_latent)
    loss = F.l1_loss(denoised, noisy)
    loss.requires_grad = True
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    encoder, decoder, model = Encoder(), Decoder(), Enhancer()
    for p in list(encoder.parameters()) + list(decoder.parameters()):
        p.requires_grad_(False)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(3):
        noisy = torch.randn(2, 10, 16)
        train_step(encoder, model, decoder, optimizer, noisy)
    assert all(p.grad is None for p in model.parameters()), "a gradient reached the transformer"
    with torch.no_grad():
        assert all(torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: transformer parameters have grad None and are unchanged after 3 Adam steps")
