# source: https://github.com/haowang1992/DSN/issues/2
# category: DL202
# expect: flag 63, 70
# evidence: loss_memory has no grad_fn, and the model after one step is identical with memory_lambda 0 and 10
import copy

import torch
from torch import nn
import torch.nn.functional as F


class SketchImageNet(nn.Module):
    """Shared backbone for sketches and photos; returns logits, kd logits, hash code, features."""

    def __init__(self, in_dim=16, feat_dim=8, num_classes=5, hash_dim=6):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim + 1, 32), nn.ReLU(), nn.Linear(32, feat_dim))
        self.classifier = nn.Linear(feat_dim, num_classes)
        self.classifier_kd = nn.Linear(feat_dim, num_classes)
        self.hashing = nn.Linear(feat_dim, hash_dim)

    def forward(self, x, tag):
        features = self.backbone(torch.cat([x, tag], dim=1))
        return self.classifier(features), self.classifier_kd(features), self.hashing(features), features


class ClassMemory:
    """Running class prototypes of photo/sketch features."""

    def __init__(self, num_classes, feat_dim):
        self.bank = torch.zeros(num_classes, feat_dim)
        self.count = torch.zeros(num_classes)

    def flush(self):
        self.bank.zero_()
        self.count.zero_()

    def add_entries(self, sketch_feats, sketch_labels, image_feats, image_labels):
        for feats, labels in ((sketch_feats, sketch_labels), (image_feats, image_labels)):
            self.bank.index_add_(0, labels, F.normalize(feats, dim=1))
            self.count.index_add_(0, labels, torch.ones(len(labels)))

    def memory_loss(self, feats, labels):
        protos = self.bank[labels] / self.count[labels].clamp(min=1).unsqueeze(1)
        return (F.normalize(feats, dim=1) * F.normalize(protos, dim=1)).sum(dim=1).mean()


def train(batches, model, criterion, optimizer, memory, args):
    model.train()
    memory.flush()
    loss_memory = None
    for sketch, label_s, image, label_i in batches:
        tag_zeros = torch.zeros(sketch.size(0), 1)
        tag_ones = torch.ones(image.size(0), 1)
        tag_all = torch.cat([tag_zeros, tag_ones], dim=0)
        target_all = torch.cat([label_s, label_i])

        output, output_kd, hash_code, features = model(torch.cat([sketch, image], 0), tag_all)
        n_s = tag_zeros.size(0)

        memory.add_entries(features[:n_s].detach(), label_s.detach(),
                           features[n_s:].detach(), label_i.detach())
        loss_memory = 1.0 - memory.memory_loss(features[n_s:].detach(), label_i.detach())

        loss = criterion(output, target_all)
        loss_kd = F.mse_loss(output_kd, output.detach())
        loss_hash = hash_code.pow(2).mean()

        optimizer.zero_grad()
        loss_total = args["cls_lambda"] * loss + args["kd_lambda"] * loss_kd + \
            args["hash_lambda"] * loss_hash + args["memory_lambda"] * loss_memory
        loss_total.backward()
        optimizer.step()
    return loss_memory


def make_batches(n_batches=2, n=6, in_dim=16, num_classes=5):
    batches = []
    for _ in range(n_batches):
        batches.append((torch.randn(n, in_dim), torch.randint(0, num_classes, (n,)),
                        torch.randn(n, in_dim), torch.randint(0, num_classes, (n,))))
    return batches


if __name__ == "__main__":
    torch.manual_seed(0)
    base = SketchImageNet()
    batches = make_batches()
    results = {}
    for memory_lambda in (0.0, 10.0):
        model = copy.deepcopy(base)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        args = {"cls_lambda": 1.0, "kd_lambda": 0.5, "hash_lambda": 0.1, "memory_lambda": memory_lambda}
        last = train(batches, model, nn.CrossEntropyLoss(), optimizer, ClassMemory(5, 8), args)
        results[memory_lambda] = (model, last)

    _, loss_memory = results[10.0]
    assert loss_memory.grad_fn is None and not loss_memory.requires_grad
    assert abs(float(loss_memory)) > 1e-3  # the term has a value, just no gradient
    for p0, p1 in zip(results[0.0][0].parameters(), results[10.0][0].parameters()):
        assert torch.equal(p0, p1)
    print("evidence holds: the memory term is computed on detached features; weighting it by 10 changes no weight")
