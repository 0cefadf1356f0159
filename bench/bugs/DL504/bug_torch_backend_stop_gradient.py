# source: https://github.com/keras-team/keras-core/pull/417
# category: DL504
# expect: flag 19
# evidence: the torch backend's stop_gradient() calls requires_grad_(False) on its input; when the input is a computed (non-leaf) tensor, as in a VQ-VAE straight-through estimator, it raises "you can only change requires_grad flags of leaf variables".
import torch
import torch.nn.functional as F

torch.manual_seed(0)


# ---- keras_core/backend/torch/core.py (excerpt) ----
def convert_to_tensor(x, dtype=None):
    if isinstance(x, torch.Tensor):
        return x if dtype is None else x.to(dtype)
    return torch.as_tensor(x, dtype=dtype)


def stop_gradient(variable):
    return variable.requires_grad_(False)


# ---- keras_core/ops (thin wrappers used by layers) ----
class ops:
    stop_gradient = staticmethod(stop_gradient)

    @staticmethod
    def mean(x):
        return torch.mean(x)

    @staticmethod
    def argmin(x, axis):
        return torch.argmin(x, dim=axis)

    @staticmethod
    def one_hot(x, num_classes):
        return F.one_hot(x, num_classes).float()


class VectorQuantizer(torch.nn.Module):
    """keras.io VQ-VAE example layer, written against keras ops."""

    def __init__(self, num_embeddings, embedding_dim, beta=0.25):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.num_embeddings = num_embeddings
        self.beta = beta
        self.embeddings = torch.nn.Parameter(torch.rand(embedding_dim, num_embeddings) * 2 - 1)
        self.losses = []

    def get_code_indices(self, flattened_inputs):
        similarity = flattened_inputs @ self.embeddings
        distances = ((flattened_inputs ** 2).sum(1, keepdim=True)
                     + (self.embeddings ** 2).sum(0) - 2 * similarity)
        return ops.argmin(distances, axis=1)

    def forward(self, x):
        input_shape = x.shape
        flattened = x.reshape(-1, self.embedding_dim)
        encoding_indices = self.get_code_indices(flattened)
        encodings = ops.one_hot(encoding_indices, self.num_embeddings)
        quantized = (encodings @ self.embeddings.T).reshape(input_shape)

        commitment_loss = ops.mean((ops.stop_gradient(quantized) - x) ** 2)
        codebook_loss = ops.mean((quantized - ops.stop_gradient(x)) ** 2)
        self.losses = [self.beta * commitment_loss + codebook_loss]

        # Straight-through estimator.
        quantized = x + ops.stop_gradient(quantized - x)
        return quantized


class VQVAE(torch.nn.Module):
    def __init__(self, latent_dim=4, num_embeddings=8):
        super().__init__()
        self.encoder = torch.nn.Linear(16, latent_dim)
        self.vq_layer = VectorQuantizer(num_embeddings, latent_dim)
        self.decoder = torch.nn.Linear(latent_dim, 16)

    def forward(self, x):
        return self.decoder(self.vq_layer(self.encoder(x)))


def train_step(model, optimizer, x):
    reconstructions = model(x)
    reconstruction_loss = ops.mean((x - reconstructions) ** 2)
    total_loss = reconstruction_loss + sum(model.vq_layer.losses)
    optimizer.zero_grad()
    total_loss.backward()
    optimizer.step()
    return total_loss.item()


if __name__ == "__main__":
    model = VQVAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = convert_to_tensor(torch.rand(8, 16))
    try:
        train_step(model, optimizer, x)
        raise AssertionError("train_step unexpectedly worked")
    except RuntimeError as e:
        msg = str(e)
    assert "you can only change requires_grad flags of leaf variables" in msg, msg
    print("evidence holds:", msg.split(".")[0])
