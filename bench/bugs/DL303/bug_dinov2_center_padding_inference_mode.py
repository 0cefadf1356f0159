# source: https://github.com/facebookresearch/dinov2/issues/399
# category: DL303
# expect: flag 28, 92
# evidence: the backbone's forward pre-hook pads the image inside @torch.inference_mode(), so the first trainable layer cannot save its input and forward_train raises "Inference tensors cannot be saved for backward"; no weight is updated
import itertools
import math
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


class CenterPadding(nn.Module):
    """Pad H and W up to a multiple of the patch size, keeping the image centred."""

    def __init__(self, multiple):
        super().__init__()
        self.multiple = multiple

    def _get_pad(self, size):
        new_size = math.ceil(size / self.multiple) * self.multiple
        pad_size = new_size - size
        pad_size_left = pad_size // 2
        pad_size_right = pad_size - pad_size_left
        return pad_size_left, pad_size_right

    @torch.inference_mode()
    def forward(self, x):
        pads = list(itertools.chain.from_iterable(self._get_pad(m) for m in x.shape[:1:-1]))
        output = F.pad(x, pads)
        return output


class TinyViT(nn.Module):
    def __init__(self, patch_size=4, embed_dim=16, depth=2):
        super().__init__()
        self.patch_size = patch_size
        self.patch_embed = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        self.blocks = nn.ModuleList(
            [nn.TransformerEncoderLayer(embed_dim, 2, 32, batch_first=True) for _ in range(depth)]
        )

    def get_intermediate_layers(self, x, n=1, reshape=False):
        x = self.patch_embed(x)
        B, C, H, W = x.shape
        tokens = x.flatten(2).transpose(1, 2)
        outputs = []
        for blk in self.blocks:
            tokens = blk(tokens)
            outputs.append(tokens)
        outputs = outputs[-n:]
        if reshape:
            outputs = [o.transpose(1, 2).reshape(B, C, H, W) for o in outputs]
        return tuple(outputs)

    def forward(self, x):
        return self.get_intermediate_layers(x)[-1].mean(1)


class DPTHead(nn.Module):
    def __init__(self, embed_dim=16, min_depth=0.01, max_depth=10.0):
        super().__init__()
        self.conv = nn.Conv2d(embed_dim, 1, 3, padding=1)
        self.min_depth, self.max_depth = min_depth, max_depth

    def forward(self, features, out_size):
        depth = torch.sigmoid(self.conv(features[-1])) * self.max_depth + self.min_depth
        return F.interpolate(depth, size=out_size, mode="bilinear", align_corners=False)


class DepthEncoderDecoder(nn.Module):
    def __init__(self, backbone, decode_head):
        super().__init__()
        self.backbone = backbone
        self.decode_head = decode_head

    def extract_feat(self, img):
        return self.backbone(img)

    def forward_train(self, img, img_metas, depth_gt, **kwargs):
        x = self.extract_feat(img)
        depth_pred = self.decode_head(x, img.shape[2:])
        losses = {"loss_depth": F.l1_loss(depth_pred, depth_gt)}
        return losses


def _make_dinov2_dpt_depther(*, patch_size=4, depth_range=(0.01, 10.0)):
    backbone = TinyViT(patch_size=patch_size)
    model = DepthEncoderDecoder(backbone=backbone, decode_head=DPTHead(min_depth=depth_range[0], max_depth=depth_range[1]))
    model.backbone.forward = partial(backbone.get_intermediate_layers, n=1, reshape=True)
    model.backbone.register_forward_pre_hook(lambda _, x: CenterPadding(backbone.patch_size)(x[0]))
    return model


def train_one_epoch(model, loader, optimizer):
    model.train()
    for img, depth_gt in loader:
        losses = model.forward_train(img, None, depth_gt)
        loss = sum(losses.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = _make_dinov2_dpt_depther(depth_range=(0.01, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = [(torch.rand(2, 3, 14, 14), torch.rand(2, 1, 16, 16) * 5) for _ in range(2)]
    before = [p.detach().clone() for p in model.parameters()]

    try:
        train_one_epoch(model, loader, optimizer)
        raised = None
    except RuntimeError as e:
        raised = str(e)

    assert raised is not None and "Inference tensors cannot be saved for backward" in raised, raised
    assert all(torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: the inference_mode padding hook makes the training forward raise; no weight changes")
