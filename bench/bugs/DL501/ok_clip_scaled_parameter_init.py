# source: https://github.com/openai/CLIP/blob/main/clip/model.py
# category: DL501
# expect: clean
# evidence: nn.Parameter(scale * torch.randn(...)) wraps the scaled tensor as a fresh leaf; class_embedding, positional_embedding and proj all get gradients and are in model.parameters()
import torch
from torch import nn


class LayerNorm(nn.LayerNorm):
    def forward(self, x: torch.Tensor):
        orig_type = x.dtype
        ret = super().forward(x.type(torch.float32))
        return ret.type(orig_type)


class VisionTransformer(nn.Module):
    def __init__(self, input_resolution: int, patch_size: int, width: int, layers: int, heads: int, output_dim: int):
        super().__init__()
        self.input_resolution = input_resolution
        self.output_dim = output_dim
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=width, kernel_size=patch_size, stride=patch_size, bias=False)

        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((input_resolution // patch_size) ** 2 + 1, width))
        self.ln_pre = LayerNorm(width)

        layer = nn.TransformerEncoderLayer(width, heads, width * 4, batch_first=False)
        self.transformer = nn.TransformerEncoder(layer, layers)

        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x: torch.Tensor):
        x = self.conv1(x)
        x = x.reshape(x.shape[0], x.shape[1], -1)
        x = x.permute(0, 2, 1)
        cls = self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype, device=x.device)
        x = torch.cat([cls, x], dim=1)
        x = x + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)
        x = x.permute(1, 0, 2)
        x = self.transformer(x)
        x = x.permute(1, 0, 2)
        x = self.ln_post(x[:, 0, :])
        if self.proj is not None:
            x = x @ self.proj
        return x


if __name__ == "__main__":
    torch.manual_seed(0)
    visual = VisionTransformer(input_resolution=8, patch_size=4, width=16, layers=1, heads=2, output_dim=8)
    images = torch.randn(2, 3, 8, 8)
    features = visual(images)
    features.pow(2).sum().backward()
    params = dict(visual.named_parameters())
    for name in ("class_embedding", "positional_embedding", "proj"):
        p = getattr(visual, name)
        assert p.is_leaf and params[name] is p
        assert p.grad is not None and p.grad.abs().sum() > 0
    torch.optim.SGD(visual.parameters(), lr=0.1)  # accepted: every parameter is a leaf
    print("evidence holds: the scaled nn.Parameter embeddings are leaves and receive gradients")
