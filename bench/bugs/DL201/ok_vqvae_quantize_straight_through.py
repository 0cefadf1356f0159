# source: https://github.com/rosinality/vq-vae-2-pytorch/blob/master/vqvae.py
# category: DL201
# expect: clean
# evidence: despite the argmax code lookup and the .detach() calls in Quantize, the straight-through estimator lets the encoder receive gradients and change, and the codebook follows by EMA.
import torch
from torch import nn
from torch.nn import functional as F


class Quantize(nn.Module):
    def __init__(self, dim, n_embed, decay=0.99, eps=1e-5):
        super().__init__()
        self.dim = dim
        self.n_embed = n_embed
        self.decay = decay
        self.eps = eps
        embed = torch.randn(dim, n_embed)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(n_embed))
        self.register_buffer("embed_avg", embed.clone())

    def forward(self, input):
        flatten = input.reshape(-1, self.dim)
        dist = (
            flatten.pow(2).sum(1, keepdim=True)
            - 2 * flatten @ self.embed
            + self.embed.pow(2).sum(0, keepdim=True)
        )
        _, embed_ind = (-dist).max(1)
        embed_onehot = F.one_hot(embed_ind, self.n_embed).type(flatten.dtype)
        embed_ind = embed_ind.view(*input.shape[:-1])
        quantize = self.embed_code(embed_ind)

        if self.training:
            embed_onehot_sum = embed_onehot.sum(0)
            embed_sum = flatten.transpose(0, 1) @ embed_onehot
            self.cluster_size.data.mul_(self.decay).add_(embed_onehot_sum, alpha=1 - self.decay)
            self.embed_avg.data.mul_(self.decay).add_(embed_sum, alpha=1 - self.decay)
            n = self.cluster_size.sum()
            cluster_size = ((self.cluster_size + self.eps) / (n + self.n_embed * self.eps) * n)
            embed_normalized = self.embed_avg / cluster_size.unsqueeze(0)
            self.embed.data.copy_(embed_normalized)

        diff = (quantize.detach() - input).pow(2).mean()
        quantize = input + (quantize - input).detach()

        return quantize, diff, embed_ind

    def embed_code(self, embed_id):
        return F.embedding(embed_id, self.embed.transpose(0, 1))


class VQVAE(nn.Module):
    def __init__(self, in_channel=3, channel=16, embed_dim=8, n_embed=32):
        super().__init__()
        self.enc_b = nn.Sequential(nn.Conv2d(in_channel, channel, 4, stride=2, padding=1), nn.ReLU(inplace=True),
                                   nn.Conv2d(channel, channel, 3, padding=1))
        self.quantize_conv_b = nn.Conv2d(channel, embed_dim, 1)
        self.quantize_b = Quantize(embed_dim, n_embed)
        self.dec = nn.Sequential(nn.Conv2d(embed_dim, channel, 3, padding=1), nn.ReLU(inplace=True),
                                 nn.ConvTranspose2d(channel, in_channel, 4, stride=2, padding=1))

    def forward(self, input):
        quant_b, diff, _ = self.encode(input)
        dec = self.decode(quant_b)
        return dec, diff

    def encode(self, input):
        enc_b = self.enc_b(input)
        quant_b = self.quantize_conv_b(enc_b).permute(0, 2, 3, 1)
        quant_b, diff_b, id_b = self.quantize_b(quant_b)
        quant_b = quant_b.permute(0, 3, 1, 2)
        diff_b = diff_b.unsqueeze(0)
        return quant_b, diff_b, id_b

    def decode(self, quant_b):
        return self.dec(quant_b)


def train(epoch, loader, model, optimizer, device):
    criterion = nn.MSELoss()
    latent_loss_weight = 0.25
    mse_sum = 0
    mse_n = 0
    for i, (img, label) in enumerate(loader):
        model.zero_grad()
        img = img.to(device)
        out, latent_loss = model(img)
        recon_loss = criterion(out, img)
        latent_loss = latent_loss.mean()
        loss = recon_loss + latent_loss_weight * latent_loss
        loss.backward()
        optimizer.step()
        mse_sum += recon_loss.item() * img.shape[0]
        mse_n += img.shape[0]
    return mse_sum / mse_n


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cpu"
    model = VQVAE().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = [(torch.rand(4, 3, 8, 8), 0) for _ in range(4)]
    enc_before = [p.detach().clone() for p in model.enc_b.parameters()]
    codebook_before = model.quantize_b.embed.clone()
    for epoch in range(2):
        mse = train(epoch, loader, model, optimizer, device)
        print("epoch", epoch, "mse %.4f" % mse)
    with torch.no_grad():
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.enc_b.parameters())
        assert all(not torch.equal(a, p) for a, p in zip(enc_before, model.enc_b.parameters()))
        assert not torch.equal(codebook_before, model.quantize_b.embed)
    print("evidence holds: the encoder trains through the straight-through quantizer and the codebook moves by EMA")
