# source: placement matrix
# category: DL304
# expect: clean
# evidence: the caller enters torch.no_grad() with `with` around the helper call, so the features it returns have no grad_fn.
import torch
from torch import nn


def featurize(backbone, images):
    return backbone(images).flatten(1)


def extract(backbone, images):
    with torch.no_grad():
        feats = featurize(backbone, images)
    return feats


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU())
    feats = extract(net, torch.randn(2, 1, 6, 6))
    assert torch.is_grad_enabled()
    assert not feats.requires_grad and feats.grad_fn is None
    print("evidence holds: with torch.no_grad() in caller -> helper's output has no grad_fn")
