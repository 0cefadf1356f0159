# source: https://github.com/zalandoresearch/pytorch-vq-vae/issues/6
# category: DL201
# expect: clean
# evidence: despite quantized.detach()/inputs.detach() and the straight-through quantized = inputs + (quantized - inputs).detach(), one training step gives non-zero gradients to the encoder, the codebook (_embedding) and the decoder, and all three change.
"""vq-vae.ipynb: VectorQuantizer, Encoder/Decoder (one residual layer, tiny channels) and the training loop."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost):
        super(VectorQuantizer, self).__init__()
        self._embedding_dim = embedding_dim
        self._num_embeddings = num_embeddings
        self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
        self._embedding.weight.data.uniform_(-1 / self._num_embeddings, 1 / self._num_embeddings)
        self._commitment_cost = commitment_cost

    def forward(self, inputs):
        # convert inputs from BCHW -> BHWC
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        input_shape = inputs.shape
        # Flatten input
        flat_input = inputs.view(-1, self._embedding_dim)
        # Calculate distances
        distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                     + torch.sum(self._embedding.weight ** 2, dim=1)
                     - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
        # Encoding
        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings, device=inputs.device)
        encodings.scatter_(1, encoding_indices, 1)
        # Quantize and unflatten
        quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
        # Loss
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        q_latent_loss = F.mse_loss(quantized, inputs.detach())
        loss = q_latent_loss + self._commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        # convert quantized from BHWC -> BCHW
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings


class Residual(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_hiddens):
        super(Residual, self).__init__()
        self._block = nn.Sequential(
            nn.ReLU(True), nn.Conv2d(in_channels, num_residual_hiddens, 3, 1, 1, bias=False),
            nn.ReLU(True), nn.Conv2d(num_residual_hiddens, num_hiddens, 1, 1, bias=False))

    def forward(self, x):
        return x + self._block(x)


class Encoder(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_hiddens):
        super(Encoder, self).__init__()
        self._conv_1 = nn.Conv2d(in_channels, num_hiddens // 2, 4, 2, 1)
        self._conv_2 = nn.Conv2d(num_hiddens // 2, num_hiddens, 4, 2, 1)
        self._residual_stack = Residual(num_hiddens, num_hiddens, num_residual_hiddens)

    def forward(self, inputs):
        x = F.relu(self._conv_1(inputs))
        x = self._conv_2(x)
        return F.relu(self._residual_stack(x))


class Decoder(nn.Module):
    def __init__(self, in_channels, num_hiddens, num_residual_hiddens):
        super(Decoder, self).__init__()
        self._conv_1 = nn.Conv2d(in_channels, num_hiddens, 3, 1, 1)
        self._residual_stack = Residual(num_hiddens, num_hiddens, num_residual_hiddens)
        self._conv_trans_1 = nn.ConvTranspose2d(num_hiddens, num_hiddens // 2, 4, 2, 1)
        self._conv_trans_2 = nn.ConvTranspose2d(num_hiddens // 2, 3, 4, 2, 1)

    def forward(self, inputs):
        x = F.relu(self._residual_stack(self._conv_1(inputs)))
        x = F.relu(self._conv_trans_1(x))
        return self._conv_trans_2(x)


class Model(nn.Module):
    def __init__(self, num_hiddens, num_residual_hiddens, num_embeddings, embedding_dim, commitment_cost):
        super(Model, self).__init__()
        self._encoder = Encoder(3, num_hiddens, num_residual_hiddens)
        self._pre_vq_conv = nn.Conv2d(num_hiddens, embedding_dim, kernel_size=1, stride=1)
        self._vq_vae = VectorQuantizer(num_embeddings, embedding_dim, commitment_cost)
        self._decoder = Decoder(embedding_dim, num_hiddens, num_residual_hiddens)

    def forward(self, x):
        z = self._pre_vq_conv(self._encoder(x))
        loss, quantized, perplexity, _ = self._vq_vae(z)
        x_recon = self._decoder(quantized)
        return loss, x_recon, perplexity


if __name__ == "__main__":
    torch.manual_seed(0)
    training_data = torch.rand(16, 3, 16, 16) - 0.5
    data_variance = training_data.var().item()
    training_loader = [training_data[i:i + 8] for i in range(0, 16, 8)]
    model = Model(num_hiddens=16, num_residual_hiddens=8, num_embeddings=8, embedding_dim=4, commitment_cost=0.25)
    optimizer = optim.Adam(model.parameters(), lr=1e-3, amsgrad=False)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    model.train()
    train_res_recon_error, train_res_perplexity = [], []
    for i in range(2):
        data = training_loader[i % len(training_loader)]
        optimizer.zero_grad()
        vq_loss, data_recon, perplexity = model(data)
        recon_error = F.mse_loss(data_recon, data) / data_variance
        loss = recon_error + vq_loss
        loss.backward()
        optimizer.step()
        train_res_recon_error.append(recon_error.item())
        train_res_perplexity.append(perplexity.item())

    for prefix in ("_encoder.", "_vq_vae._embedding.", "_decoder."):
        params = [(n, p) for n, p in model.named_parameters() if n.startswith(prefix)]
        assert all(p.grad is not None for n, p in params), prefix
        assert any(p.grad.abs().sum().item() > 0 for n, p in params), prefix
        with torch.no_grad():
            assert any(not torch.equal(before[n], p) for n, p in params), prefix
    assert np.isfinite(train_res_recon_error).all()
    print("evidence holds: encoder, codebook and decoder all receive gradients and train")
