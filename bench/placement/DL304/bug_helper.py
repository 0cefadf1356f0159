# source: placement matrix
# category: DL304
# expect: flag 14
# evidence: the caller's bare torch.no_grad() does not disable grad for the helper's model call, so the features it returns carry a grad_fn.
import torch
from torch import nn


def featurize(backbone, images):
    return backbone(images).flatten(1)


def extract(backbone, images):
    torch.no_grad()
    feats = featurize(backbone, images)
    return feats


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())
    feats = extract(net, torch.randn(2, 1, 6, 6))
    assert torch.is_grad_enabled()
    assert feats.requires_grad and feats.grad_fn is not None
    print("evidence holds: bare torch.no_grad() in caller -> helper's output has grad_fn")
