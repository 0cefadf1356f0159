# source: https://github.com/microsoft/Biodiversity/pull/662
# category: DL301
# expect: flag 59, 62
# evidence: batch_image_classification() runs self.forward on every batch with grad enabled (the module was put in eval mode in __init__) and appends the logits to total_logits, so every batch's graph stays alive until the end of the run
import numpy as np
import torch
import torch.nn as nn


class ResNetBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        x = self.avgpool(x)
        return torch.flatten(x, 1)


class PlainResNetClassifier(nn.Module):
    def __init__(self, num_cls=1):
        super(PlainResNetClassifier, self).__init__()
        self.feature = ResNetBackbone()
        self.classifier = nn.Linear(16, num_cls)


class PlainResNetInference(nn.Module):
    """Inference module for the PlainResNet Classifier."""

    def __init__(self, num_cls=36, device="cpu"):
        super(PlainResNetInference, self).__init__()
        self.device = device
        self.net = PlainResNetClassifier(num_cls=num_cls)
        self.eval()
        self.net.to(self.device)

    def results_generation(self, logits, img_ids, id_strip=None):
        probs = torch.softmax(logits, dim=1)
        confs, preds = probs.max(dim=1)
        return [{"img_id": str(i), "class_id": int(p), "confidence": float(c)}
                for i, p, c in zip(img_ids, preds, confs)]

    def forward(self, img):
        feats = self.net.feature(img)
        logits = self.net.classifier(feats)
        return logits

    def batch_image_classification(self, dataloader, id_strip=None):
        """Process a batch of images for classification."""
        total_logits = []
        total_paths = []

        for batch in dataloader:
            imgs, paths = batch
            imgs = imgs.to(self.device)
            total_logits.append(self.forward(imgs))
            total_paths.append(paths)

        total_logits = torch.cat(total_logits, dim=0).cpu()
        total_paths = np.concatenate(total_paths, axis=0)

        return self.results_generation(total_logits, total_paths, id_strip=id_strip), total_logits


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


if __name__ == "__main__":
    torch.manual_seed(0)
    classifier = PlainResNetInference(num_cls=5)

    def loader(n):
        return [(torch.rand(4, 3, 16, 16), ["img_%d_%d.jpg" % (b, i) for i in range(4)]) for b in range(n)]

    sizes = []
    for n in (2, 4):
        results, total_logits = classifier.batch_image_classification(loader(n))
        assert not classifier.training and total_logits.grad_fn is not None
        sizes.append(graph_nodes(total_logits))
    assert sizes[0] < sizes[1], sizes
    print("evidence holds: the concatenated logits keep every batch's graph (%d nodes for 2 batches, %d for 4)"
          % tuple(sizes))
