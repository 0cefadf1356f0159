# source: https://github.com/openai/CLIP/blob/main/clip/model.py
# category: DL102
# expect: clean
# evidence: convert_weights runs inside build_model before the model is used: the same Parameter objects become fp16, the loaded state is preserved and the fp16 model runs and returns fp16 features
import torch
from torch import nn


class LayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm to handle fp16."""

    def forward(self, x):
        orig_type = x.dtype
        ret = super().forward(x.type(torch.float32))
        return ret.type(orig_type)


class TinyCLIP(nn.Module):
    def __init__(self, embed_dim=8, width=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=4, stride=4, bias=False)
        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(torch.randn(width, embed_dim) * width ** -0.5)

    @property
    def dtype(self):
        return self.conv1.weight.dtype

    def encode_image(self, image):
        x = self.conv1(image.type(self.dtype)).flatten(2).mean(-1)
        return self.ln_post(x) @ self.proj


def convert_weights(model: nn.Module):
    """Convert applicable model parameters to fp16"""

    def _convert_weights_to_fp16(l):
        if isinstance(l, (nn.Conv1d, nn.Conv2d, nn.Linear)):
            l.weight.data = l.weight.data.half()
            if l.bias is not None:
                l.bias.data = l.bias.data.half()

        for name in ["text_projection", "proj"]:
            if hasattr(l, name):
                attr = getattr(l, name)
                if attr is not None:
                    attr.data = attr.data.half()

    model.apply(_convert_weights_to_fp16)


def build_model(state_dict: dict):
    model = TinyCLIP()
    model.load_state_dict(state_dict)
    convert_weights(model)
    return model.eval()


if __name__ == "__main__":
    torch.manual_seed(0)
    reference = TinyCLIP()
    state_dict = {k: v.clone() for k, v in reference.state_dict().items()}
    model = build_model(state_dict)
    assert model.conv1.weight.dtype == torch.float16 and model.proj.dtype == torch.float16
    assert isinstance(model.proj, nn.Parameter) and any(p is model.proj for p in model.parameters())
    assert torch.allclose(model.conv1.weight.float(), state_dict["conv1.weight"], atol=1e-3)
    with torch.no_grad():
        feats = model.encode_image(torch.rand(2, 3, 8, 8))
        ref = reference.encode_image(torch.rand(2, 3, 8, 8))
    assert feats.dtype == torch.float16 and feats.shape == ref.shape
    print("evidence holds: the parameters were converted to fp16 at build time and the fp16 model runs")
