# source: https://github.com/aliasgharkhani/SLiMe/issues/10
# category: DL501
# expect: flag 50, 51, 60
# evidence: each embedding to optimize is a clone of a slice of a text embedding that carries the text encoder's graph; requires_grad_(True) leaves it a non-leaf and Adam raises "can't optimize a non-leaf Tensor"
import torch
from torch import nn
import torch.nn.functional as F


class TextEncoder(nn.Module):
    """Stand-in for the CLIP text encoder of Stable Diffusion."""

    def __init__(self, vocab=32, dim=16, max_len=8):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, dim)
        self.position_embedding = nn.Parameter(torch.zeros(max_len, dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, ids):
        return self.proj(self.token_embedding(ids) + self.position_embedding[: ids.shape[1]])


class StableDiffusion(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.text_encoder = TextEncoder(dim=dim)
        self.unet_attn = nn.Linear(dim, dim)

    def get_text_embeds(self, ids, uncond_ids):
        text_embeddings = self.text_encoder(ids)
        uncond_embeddings = self.text_encoder(uncond_ids)
        return uncond_embeddings, text_embeddings

    def attention_maps(self, latents, text_embedding):
        q = latents.flatten(2).transpose(1, 2)
        k = self.unet_attn(text_embedding)
        return torch.softmax(q @ k.transpose(1, 2), dim=-1)


class Slime(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.stable_diffusion = StableDiffusion()
        self.num_parts = config["num_parts"]
        self.prepare_text_embeddings()
        self.embeddings_to_optimize = []
        if config["train"]:
            for i in range(1, self.num_parts):
                embedding = self.text_embedding[:, i:i + 1].clone()
                embedding.requires_grad_(True)
                self.embeddings_to_optimize.append(embedding)

    def prepare_text_embeddings(self):
        ids = torch.arange(self.num_parts).unsqueeze(0)
        self.uncond_embedding, self.text_embedding = self.stable_diffusion.get_text_embeds(ids, torch.zeros_like(ids))

    def configure_optimizers(self):
        parameters = [{"params": self.embeddings_to_optimize, "lr": self.config["lr"]}]
        return torch.optim.Adam(parameters)

    def training_step(self, latents, mask):
        text_embedding = torch.cat([self.text_embedding[:, :1], *self.embeddings_to_optimize], dim=1)
        attn = self.stable_diffusion.attention_maps(latents, text_embedding)
        return F.cross_entropy(attn.reshape(-1, attn.shape[-1]), mask.reshape(-1))


def fit(model, latents, mask, steps=2):
    optimizer = model.configure_optimizers()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model.training_step(latents, mask)
        loss.backward()
        optimizer.step()
    return optimizer


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Slime({"num_parts": 4, "train": True, "lr": 0.1})
    latents = torch.randn(1, 16, 2, 2)
    mask = torch.randint(0, 3, (1, 4))
    assert all(not e.is_leaf for e in model.embeddings_to_optimize)
    try:
        fit(model, latents, mask)
        raised = None
    except ValueError as e:
        raised = str(e)
    assert raised == "can't optimize a non-leaf Tensor", raised
    print("evidence holds: the cloned slices of the text embedding are non-leaf; configure_optimizers() is refused")
