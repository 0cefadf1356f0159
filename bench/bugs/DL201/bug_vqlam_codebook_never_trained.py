# source: https://github.com/showlab/Olaf-World/issues/8
# category: DL201
# expect: flag 20, 41
# evidence: over 20 training steps vq.codebook.weight keeps grad None and its initial values although codebook_loss is part of the total loss
import torch
import torch.nn as nn
import torch.nn.functional as F


class VectorQuantizer(nn.Module):
    def __init__(self, num_latents, latent_dim):
        super().__init__()
        self.codebook = nn.Embedding(num_latents, latent_dim)
        nn.init.uniform_(self.codebook.weight, -1.0 / num_latents, 1.0 / num_latents)

    def forward(self, x):
        distance = torch.cdist(x, self.codebook.weight)
        indices = torch.argmin(distance, dim=-1)
        z = self.codebook(indices)
        z_q = x + (z - x).detach()
        return z_q, z, x, indices


class VQLatentActionModel(nn.Module):
    def __init__(self, in_dim=12, latent_dim=4, num_latents=8, beta=0.25):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(2 * in_dim, 32), nn.GELU(), nn.Linear(32, latent_dim))
        self.vq = VectorQuantizer(num_latents, latent_dim)
        self.decoder = nn.Sequential(nn.Linear(in_dim + latent_dim, 32), nn.GELU(), nn.Linear(32, in_dim))
        self.beta = beta

    def encode(self, frames, next_frames):
        z_e = self.encoder(torch.cat([frames, next_frames], dim=-1))
        z_q, _, _, indices = self.vq(z_e)
        return z_e, z_q, indices

    def forward(self, frames, next_frames):
        z_e, z_q, indices = self.encode(frames, next_frames)
        recon = self.decoder(torch.cat([frames, z_q], dim=-1))
        recon_loss = F.mse_loss(recon, next_frames)
        codebook_loss = F.mse_loss(z_q, z_e.detach())
        commit_loss = F.mse_loss(z_e, z_q.detach())
        loss = recon_loss + codebook_loss + self.beta * commit_loss
        return loss, {"recon": recon_loss, "codebook": codebook_loss, "commit": commit_loss}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = VQLatentActionModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    frames, next_frames = torch.randn(16, 12), torch.randn(16, 12)
    codebook_init = model.vq.codebook.weight.detach().clone()
    for step in range(20):
        loss, parts = model(frames, next_frames)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert parts["codebook"].item() > 0
    assert model.vq.codebook.weight.grad is None
    assert torch.equal(codebook_init, model.vq.codebook.weight)
    print("evidence holds: codebook_loss is computed on the straight-through z_q, so the codebook never moves")
