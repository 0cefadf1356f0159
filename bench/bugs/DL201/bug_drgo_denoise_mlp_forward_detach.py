# source: https://github.com/user683/DRGO/issues/1
# category: DL201
# expect: flag 50, 51, 54, 56
# evidence: after training steps every layer of the denoising MLP except the final output layer (emb_layer, in_layers, first out layer) has grad None and keeps its initial weights, although Adam owns all of them.
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MLP(nn.Module):
    """A deep neural network for the reverse diffusion process."""

    def __init__(self, in_dims, out_dims, emb_size, time_type="cat", norm=False, dropout=0.5):
        super(MLP, self).__init__()
        self.in_dims = in_dims
        self.out_dims = out_dims
        assert out_dims[0] == in_dims[-1], "In and out dimensions must equal to each other."
        self.time_type = time_type
        self.time_emb_dim = emb_size
        self.norm = norm
        self.emb_layer = nn.Linear(self.time_emb_dim, self.time_emb_dim)
        in_dims_temp = [self.in_dims[0] + self.time_emb_dim] + self.in_dims[1:]
        out_dims_temp = self.out_dims
        self.in_layers = nn.ModuleList([nn.Linear(d_in, d_out)
                                        for d_in, d_out in zip(in_dims_temp[:-1], in_dims_temp[1:])])
        self.out_layers = nn.ModuleList([nn.Linear(d_in, d_out)
                                         for d_in, d_out in zip(out_dims_temp[:-1], out_dims_temp[1:])])
        self.drop = nn.Dropout(dropout)
        self.init_weights()

    def init_weights(self):
        for layer in list(self.in_layers) + list(self.out_layers) + [self.emb_layer]:
            size = layer.weight.size()
            std = np.sqrt(2.0 / (size[0] + size[1]))
            layer.weight.data.normal_(0.0, std)
            layer.bias.data.normal_(0.0, 0.001)

    def forward(self, x, timesteps):
        time_emb = timestep_embedding(timesteps, self.time_emb_dim).to(x.device)
        emb = self.emb_layer(time_emb)
        if self.norm:
            x = F.normalize(x)
        x = self.drop(x)
        h = torch.cat([x, emb], dim=-1)
        for i, layer in enumerate(self.in_layers):
            h = layer(h.detach())
            h = torch.tanh(h.detach())

        for i, layer in enumerate(self.out_layers):
            h = layer(h.detach())
            if i != len(self.out_layers) - 1:
                h = torch.tanh(h.detach())

        return h


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half)
    args = timesteps[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


def training_losses(model, x_start, steps=10):
    t = torch.randint(0, steps, (x_start.shape[0],))
    noise = torch.randn_like(x_start)
    alpha = 1.0 - t.float().unsqueeze(1) / steps
    x_t = alpha.sqrt() * x_start + (1 - alpha).sqrt() * noise
    model_output = model(x_t, t)
    return F.mse_loss(model_output, x_start)


if __name__ == "__main__":
    model = MLP(in_dims=[20, 16], out_dims=[16, 12, 20], emb_size=8, norm=False, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for _ in range(3):
        batch = torch.rand(6, 20)
        optimizer.zero_grad()
        loss = training_losses(model, batch)
        loss.backward()
        optimizer.step()
    params = dict(model.named_parameters())
    for name in ["emb_layer.weight", "in_layers.0.weight", "out_layers.0.weight"]:
        assert params[name].grad is None, name
        assert torch.equal(params[name].detach(), before[name]), name
    assert params["out_layers.1.weight"].grad is not None
    assert not torch.equal(params["out_layers.1.weight"].detach(), before["out_layers.1.weight"])
    print("evidence holds: only the last out layer trains; emb_layer/in_layers/out_layers.0 keep grad None and their initial weights")
