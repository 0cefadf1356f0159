# source: https://github.com/huggingface/pytorch-image-models/blob/main/timm/models/vision_transformer.py
# category: DL501
# expect: clean
# evidence: nn.Parameter(torch.randn(...) * .02) wraps the scaled tensor as a fresh leaf: cls_token and pos_embed are in model.parameters(), get gradients and are updated by the optimizer
import torch
import torch.nn as nn


class PatchEmbed(nn.Module):
    def __init__(self, img_size=8, patch_size=4, in_chans=3, embed_dim=16):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self, img_size=8, patch_size=4, in_chans=3, num_classes=5, embed_dim=16, depth=1, num_heads=2,
                 class_token=True, no_embed_class=False):
        super().__init__()
        self.num_prefix_tokens = 1 if class_token else 0
        self.no_embed_class = no_embed_class
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches

        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        embed_len = num_patches if no_embed_class else num_patches + self.num_prefix_tokens
        self.pos_embed = nn.Parameter(torch.randn(1, embed_len, embed_dim) * .02)
        layer = nn.TransformerEncoderLayer(embed_dim, num_heads, embed_dim * 4, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def _pos_embed(self, x):
        if self.cls_token is not None:
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        return x + self.pos_embed

    def forward(self, x):
        x = self._pos_embed(self.patch_embed(x))
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


if __name__ == "__main__":
    torch.manual_seed(0)
    model = VisionTransformer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)  # accepted: every parameter is a leaf
    pos_before = model.pos_embed.detach().clone()
    loss = nn.functional.cross_entropy(model(torch.randn(2, 3, 8, 8)), torch.tensor([1, 3]))
    loss.backward()
    assert model.pos_embed.is_leaf and model.pos_embed.grad is not None
    assert model.cls_token.grad is not None
    assert any(p is model.pos_embed for p in model.parameters())
    optimizer.step()
    assert not torch.equal(pos_before, model.pos_embed.detach())
    print("evidence holds: the scaled nn.Parameter position embedding is a leaf; it gets a gradient and is updated")
