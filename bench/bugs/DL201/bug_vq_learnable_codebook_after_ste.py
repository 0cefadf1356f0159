# source: https://github.com/lucidrains/vector-quantize-pytorch/issues/47
# category: DL201
# expect: flag 42, 48
# evidence: with learnable_codebook=True and ema_update=False, vq._codebook.embed.grad is None after loss.backward() and the codebook never changes during training
import torch
from torch import nn
import torch.nn.functional as F


def identity(t):
    return t


class EuclideanCodebook(nn.Module):
    def __init__(self, dim, codebook_size, learnable_codebook=False):
        super().__init__()
        embed = torch.randn(codebook_size, dim)
        self.learnable_codebook = learnable_codebook
        if learnable_codebook:
            self.embed = nn.Parameter(embed)
        else:
            self.register_buffer("embed", embed)

    def forward(self, x):
        dist = -torch.cdist(x, self.embed)
        embed_ind = dist.argmax(dim=-1)
        quantize = F.embedding(embed_ind, self.embed)
        return quantize, embed_ind


class VectorQuantize(nn.Module):
    def __init__(self, dim, codebook_size, commitment_weight=1.0, learnable_codebook=False, ema_update=True):
        super().__init__()
        self.commitment_weight = commitment_weight
        self.learnable_codebook = learnable_codebook
        self.ema_update = ema_update
        self._codebook = EuclideanCodebook(dim, codebook_size, learnable_codebook=learnable_codebook)

    def forward(self, x):
        quantize, embed_ind = self._codebook(x)
        if self.training:
            quantize = x + (quantize - x).detach()

        loss = torch.tensor([0.0], device=x.device, requires_grad=self.training)
        if self.training and self.commitment_weight > 0:
            maybe_detach = torch.detach if not self.learnable_codebook else identity
            commit_quantize = maybe_detach(quantize)
            commit_loss = F.mse_loss(commit_quantize, x)
            loss = loss + commit_loss * self.commitment_weight
        return quantize, embed_ind, loss


class AutoEncoder(nn.Module):
    def __init__(self, dim=8, codebook_size=16):
        super().__init__()
        self.enc = nn.Linear(12, dim)
        self.vq = VectorQuantize(dim, codebook_size, learnable_codebook=True, ema_update=False)
        self.dec = nn.Linear(dim, 12)

    def forward(self, x):
        quantized, indices, commit_loss = self.vq(self.enc(x))
        return self.dec(quantized), commit_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    model = AutoEncoder()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x = torch.randn(32, 12)
    embed_init = model.vq._codebook.embed.detach().clone()
    for _ in range(10):
        out, cmt_loss = model(x)
        rec_loss = (out - x).abs().mean()
        opt.zero_grad()
        (rec_loss + cmt_loss.sum()).backward()
        opt.step()
    assert model.vq._codebook.embed.requires_grad
    assert model.vq._codebook.embed.grad is None
    assert torch.equal(embed_init, model.vq._codebook.embed)
    print("evidence holds: the learnable codebook is detached by the straight-through line and never trains")
