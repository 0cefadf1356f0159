# source: https://github.com/lucidrains/vector-quantize-pytorch/issues/40
# category: DL201
# expect: clean
# evidence: the encoder gets gradients through the straight-through estimator and the commitment loss, and the EMA codebook (a buffer) moves toward the data
import torch
from torch import nn
import torch.nn.functional as F


def ema_inplace(moving_avg, new, decay):
    moving_avg.mul_(decay).add_(new, alpha=1 - decay)


def laplace_smoothing(x, n_categories, eps=1e-5):
    return (x + eps) / (x.sum() + n_categories * eps)


class EuclideanCodebook(nn.Module):
    def __init__(self, dim, codebook_size, decay=0.8, eps=1e-5):
        super().__init__()
        self.decay, self.eps, self.codebook_size = decay, eps, codebook_size
        embed = torch.randn(codebook_size, dim)
        self.register_buffer("cluster_size", torch.zeros(codebook_size))
        self.register_buffer("embed", embed)
        self.register_buffer("embed_avg", embed.clone())

    @torch.no_grad()
    def ema_update(self, flatten, embed_onehot):
        ema_inplace(self.cluster_size, embed_onehot.sum(0), self.decay)
        embed_sum = embed_onehot.t() @ flatten
        ema_inplace(self.embed_avg, embed_sum, self.decay)
        cluster_size = laplace_smoothing(self.cluster_size, self.codebook_size, self.eps) * self.cluster_size.sum()
        self.embed.copy_(self.embed_avg / cluster_size.unsqueeze(1))

    def forward(self, x):
        flatten = x.reshape(-1, x.shape[-1])
        dist = -torch.cdist(flatten, self.embed)
        embed_ind = dist.argmax(dim=-1)
        embed_onehot = F.one_hot(embed_ind, self.codebook_size).type(x.dtype)
        quantize = F.embedding(embed_ind, self.embed).view_as(x)
        if self.training:
            self.ema_update(flatten, embed_onehot)
        return quantize, embed_ind


class VectorQuantize(nn.Module):
    def __init__(self, dim, codebook_size, decay=0.8, commitment_weight=1.0):
        super().__init__()
        self._codebook = EuclideanCodebook(dim, codebook_size, decay=decay)
        self.commitment_weight = commitment_weight

    def forward(self, x):
        quantize, embed_ind = self._codebook(x)
        loss = torch.tensor([0.0], requires_grad=self.training)
        if self.training:
            quantize = x + (quantize - x).detach()
            commit_loss = F.mse_loss(quantize.detach(), x)
            loss = loss + commit_loss * self.commitment_weight
        return quantize, embed_ind, loss


class SimpleVQAutoEncoder(nn.Module):
    def __init__(self, dim=8, codebook_size=16):
        super().__init__()
        self.enc = nn.Linear(12, dim)
        self.vq = VectorQuantize(dim, codebook_size)
        self.dec = nn.Linear(dim, 12)

    def forward(self, x):
        quantized, indices, commit_loss = self.vq(self.enc(x))
        return self.dec(quantized), indices, commit_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SimpleVQAutoEncoder()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    x = torch.randn(32, 12)
    embed_before = model.vq._codebook.embed.clone()
    for _ in range(5):
        out, indices, cmt_loss = model(x)
        rec_loss = (out - x).abs().mean()
        opt.zero_grad()
        (rec_loss + cmt_loss.sum()).backward()
        opt.step()
    assert all(p.grad is not None for p in model.enc.parameters())
    assert not torch.equal(embed_before, model.vq._codebook.embed)
    assert "_codebook.embed" not in dict(model.vq.named_parameters())
    print("evidence holds: the encoder trains through the STE and commitment loss; the codebook is updated by EMA, not by gradients")
