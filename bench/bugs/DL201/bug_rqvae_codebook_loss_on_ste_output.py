# source: https://github.com/EdoardoBotta/RQ-VAE-Recommender/issues/24
# category: DL201
# expect: flag 26, 71
# evidence: after loss.backward() every layers.N.embedding.weight has grad None and the codebooks stay at their initial values while encoder and decoder train
from typing import List, NamedTuple

import torch
from torch import nn
import torch.nn.functional as F


class QuantizeOutput(NamedTuple):
    embeddings: torch.Tensor
    ids: torch.Tensor


class Quantize(nn.Module):
    def __init__(self, embed_dim, n_embed):
        super().__init__()
        self.embedding = nn.Embedding(n_embed, embed_dim)

    def forward(self, x):
        dist = torch.cdist(x, self.embedding.weight)
        ids = dist.argmin(dim=-1)
        emb = self.embedding(ids)
        emb_out = x + (emb - x).detach()
        return QuantizeOutput(embeddings=emb_out, ids=ids)


class QuantizeLoss(nn.Module):
    def __init__(self, commitment_weight=0.25):
        super().__init__()
        self.commitment_weight = commitment_weight

    def forward(self, query, value):
        emb_loss = ((query.detach() - value) ** 2).sum(axis=[-1])
        query_loss = ((query - value.detach()) ** 2).sum(axis=[-1])
        return emb_loss + self.commitment_weight * query_loss


class RqVaeComputedLosses(NamedTuple):
    loss: torch.Tensor
    reconstruction_loss: torch.Tensor
    rqvae_loss: torch.Tensor


class RqVae(nn.Module):
    def __init__(self, input_dim=16, embed_dim=4, codebook_size=8, n_layers=3):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(input_dim, 16), nn.SiLU(), nn.Linear(16, embed_dim))
        self.decoder = nn.Sequential(nn.Linear(embed_dim, 16), nn.SiLU(), nn.Linear(16, input_dim))
        self.layers = nn.ModuleList([Quantize(embed_dim, codebook_size) for _ in range(n_layers)])
        self.rqvae_loss = QuantizeLoss()

    def get_semantic_ids(self, x):
        res = self.encoder(x)
        embs: List[torch.Tensor] = []
        residuals: List[torch.Tensor] = []
        for layer in self.layers:
            residuals.append(res)
            quantized = layer(res)
            emb = quantized.embeddings
            res = res - emb
            embs.append(emb)
        return torch.stack(embs, dim=-1), torch.stack(residuals, dim=-1)

    def forward(self, x):
        embs, residuals = self.get_semantic_ids(x)
        x_hat = self.decoder(embs.sum(axis=-1))
        reconstruction_loss = ((x_hat - x) ** 2).sum(axis=-1)
        rqvae_loss = self.rqvae_loss(residuals.transpose(1, 2), embs.transpose(1, 2)).sum(axis=-1)
        loss = (reconstruction_loss + rqvae_loss).mean()
        return RqVaeComputedLosses(loss, reconstruction_loss.mean(), rqvae_loss.mean())


def train(model, data, iterations=5, lr=1e-2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(iterations):
        out = model(data)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    model = RqVae()
    data = torch.randn(32, 16)
    codebooks_before = [layer.embedding.weight.detach().clone() for layer in model.layers]
    out = train(model, data)
    assert out.rqvae_loss.item() > 0
    assert all(layer.embedding.weight.grad is None for layer in model.layers)
    assert all(torch.equal(a, layer.embedding.weight) for a, layer in zip(codebooks_before, model.layers))
    assert all(p.grad is not None for p in model.encoder.parameters())
    print("evidence holds: the rqvae_loss is fed the straight-through output, so no codebook ever gets a gradient")
