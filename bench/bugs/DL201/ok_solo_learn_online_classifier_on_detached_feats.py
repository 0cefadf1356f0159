# source: https://github.com/vturrisi/solo-learn/issues/135
# category: DL201
# expect: clean
# evidence: after a training step the backbone gets gradients from the SSL loss and changes, and the online classifier trains on the detached features
import torch
import torch.nn as nn
import torch.nn.functional as F


class BaseMethod(nn.Module):
    def __init__(self, num_classes=5, features_dim=16):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, features_dim))
        self.classifier = nn.Linear(features_dim, num_classes)

    def forward(self, X):
        feats = self.backbone(X)
        logits = self.classifier(feats.detach())
        return {"logits": logits, "feats": feats}

    def _base_shared_step(self, X, targets):
        out = self(X)
        loss = F.cross_entropy(out["logits"], targets)
        acc = (out["logits"].argmax(dim=1) == targets).float().mean()
        out.update({"loss": loss, "acc1": acc})
        return out


class SimCLR(BaseMethod):
    def __init__(self, proj_output_dim=8, temperature=0.2, **kwargs):
        super().__init__(**kwargs)
        self.temperature = temperature
        self.projector = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, proj_output_dim))

    def simclr_loss(self, z1, z2):
        z = F.normalize(torch.cat([z1, z2]), dim=-1)
        sim = z @ z.t() / self.temperature
        sim.fill_diagonal_(float("-inf"))
        n = z1.shape[0]
        targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
        return F.cross_entropy(sim, targets)

    def training_step(self, batch):
        (X1, X2), targets = batch
        outs = [self._base_shared_step(X, targets) for X in (X1, X2)]
        class_loss = sum(o["loss"] for o in outs) / 2
        z1, z2 = self.projector(outs[0]["feats"]), self.projector(outs[1]["feats"])
        nce_loss = self.simclr_loss(z1, z2)
        metrics = {"train_class_loss": class_loss.detach(), "train_nce_loss": nce_loss.detach()}
        return nce_loss + class_loss, metrics


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SimCLR()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = ((torch.randn(6, 3, 8, 8), torch.randn(6, 3, 8, 8)), torch.randint(0, 5, (6,)))
    before = [p.detach().clone() for p in model.backbone.parameters()]
    loss, metrics = model.training_step(batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert all(p.grad is not None for p in model.backbone.parameters())
    assert all(p.grad is not None for p in model.classifier.parameters())
    assert not any(torch.equal(a, b) for a, b in zip(before, model.backbone.parameters()))
    print("evidence holds: the backbone trains through the SSL loss; only the online classifier's input is detached")
