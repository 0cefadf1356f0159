# source: https://github.com/lucidrains/CoCa-pytorch/issues/6
# category: DL201
# expect: flag 41
# evidence: after coca(text, images, return_loss=True).backward(), every parameter of the ViT image encoder has grad None; the text side gets gradients
import torch
from torch import nn
import torch.nn.functional as F


class SimpleViT(nn.Module):
    def __init__(self, image_size=8, patch_size=4, dim=16, depth=1, heads=2, num_classes=10):
        super().__init__()
        self.patch_size = patch_size
        num_patches = (image_size // patch_size) ** 2
        self.to_patch_embedding = nn.Linear(3 * patch_size * patch_size, dim)
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, depth)
        self.linear_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        p = self.patch_size
        b, c, h, w = img.shape
        x = img.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)
        x = self.to_patch_embedding(x) + self.pos_embedding
        x = self.transformer(x)
        return self.linear_head(x.mean(dim=1))


class Extractor(nn.Module):
    def __init__(self, vit, layer_name="transformer", return_embeddings_only=False):
        super().__init__()
        self.vit = vit
        self.layer_name = layer_name
        self.latents = None
        self.hooks = []
        self.hook_registered = False
        self.return_embeddings_only = return_embeddings_only

    def _hook(self, _, inputs, output):
        self.latents = output.clone().detach()

    def _register_hook(self):
        layer = getattr(self.vit, self.layer_name)
        handle = layer.register_forward_hook(self._hook)
        self.hooks.append(handle)
        self.hook_registered = True

    def clear(self):
        del self.latents
        self.latents = None

    def forward(self, img, return_embeddings_only=False):
        self.clear()
        if not self.hook_registered:
            self._register_hook()
        pred = self.vit(img)
        latents = self.latents
        if return_embeddings_only or self.return_embeddings_only:
            return latents
        return pred, latents


class CoCa(nn.Module):
    def __init__(self, dim, num_tokens, img_encoder, image_dim, caption_loss_weight=1.0, contrastive_loss_weight=1.0):
        super().__init__()
        self.img_encoder = img_encoder
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.img_to_latents = nn.Linear(image_dim, dim)
        self.text_to_latents = nn.Linear(dim, dim)
        self.cross_attn = nn.MultiheadAttention(dim, 2, kdim=image_dim, vdim=image_dim, batch_first=True)
        self.to_logits = nn.Linear(dim, num_tokens)
        self.temperature = nn.Parameter(torch.tensor(1.0))
        self.caption_loss_weight = caption_loss_weight
        self.contrastive_loss_weight = contrastive_loss_weight

    def embed_image(self, images):
        image_tokens = self.img_encoder(images)
        return image_tokens.mean(dim=1), image_tokens

    def forward(self, text, images, return_loss=False):
        text_tokens = self.token_emb(text[:, :-1])
        image_embeds, image_tokens = self.embed_image(images)
        text_embeds = text_tokens.mean(dim=1)
        attended, _ = self.cross_attn(text_tokens, image_tokens, image_tokens)
        logits = self.to_logits(text_tokens + attended)
        if not return_loss:
            return logits
        caption_loss = F.cross_entropy(logits.transpose(1, 2), text[:, 1:])
        text_latents = F.normalize(self.text_to_latents(text_embeds), dim=-1)
        image_latents = F.normalize(self.img_to_latents(image_embeds), dim=-1)
        sim = text_latents @ image_latents.t() * self.temperature.exp()
        labels = torch.arange(text.shape[0])
        contrastive_loss = (F.cross_entropy(sim, labels) + F.cross_entropy(sim.t(), labels)) * 0.5
        return caption_loss * self.caption_loss_weight + contrastive_loss * self.contrastive_loss_weight


if __name__ == "__main__":
    torch.manual_seed(0)
    vit = SimpleViT()
    vit = Extractor(vit, return_embeddings_only=True)
    coca = CoCa(dim=16, num_tokens=20, img_encoder=vit, image_dim=16)
    optimizer = torch.optim.Adam(coca.parameters(), lr=1e-3)
    text = torch.randint(0, 20, (4, 6))
    images = torch.randn(4, 3, 8, 8)
    loss = coca(text, images, return_loss=True)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert all(p.grad is None for p in coca.img_encoder.vit.transformer.parameters())
    assert coca.img_encoder.vit.to_patch_embedding.weight.grad is None
    assert coca.token_emb.weight.grad is not None
    print("evidence holds: the ViT behind the Extractor hook gets no gradient from the CoCa losses")
