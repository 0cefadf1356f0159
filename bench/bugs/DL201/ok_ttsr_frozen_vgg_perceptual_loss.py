# source: https://github.com/researchmm/TTSR/issues/28
# category: DL201
# expect: clean
# evidence: the VGG feature extractor is explicitly frozen and stays unchanged, while the SR network receives gradients through it from the perceptual loss
import torch
import torch.nn as nn
import torch.nn.functional as F


class Vgg19(nn.Module):
    def __init__(self, requires_grad=False):
        super().__init__()
        self.slice1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        if not requires_grad:
            for param in self.slice1.parameters():
                param.requires_grad = False
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))

    def forward(self, X):
        return self.slice1(X - self.mean)


class PerceptualLoss(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, sr_relu5_1, hr_relu5_1):
        return F.mse_loss(sr_relu5_1, hr_relu5_1)


class MainNet(nn.Module):
    def __init__(self, scale=2):
        super().__init__()
        self.head = nn.Conv2d(3, 16, 3, padding=1)
        self.tail = nn.Conv2d(16, 3 * scale * scale, 3, padding=1)
        self.shuffle = nn.PixelShuffle(scale)

    def forward(self, lr):
        return torch.tanh(self.shuffle(self.tail(F.relu(self.head(lr)))))


class Trainer:
    def __init__(self, model, vgg19, lambda_rec=1.0, lambda_per=1e-2):
        self.model = model
        self.vgg19 = vgg19
        self.rec_loss = nn.L1Loss()
        self.per_loss = PerceptualLoss()
        self.lambda_rec, self.lambda_per = lambda_rec, lambda_per
        self.params = [{"params": filter(lambda p: p.requires_grad, self.model.parameters()), "lr": 1e-3}]
        self.optimizer = torch.optim.Adam(self.params, betas=(0.9, 0.999), eps=1e-8)

    def train(self, loader):
        self.model.train()
        for lr, hr in loader:
            self.optimizer.zero_grad()
            sr = self.model(lr)
            rec_loss = self.lambda_rec * self.rec_loss(sr, hr)
            sr_relu5_1 = self.vgg19((sr + 1.0) / 2.0)
            with torch.no_grad():
                hr_relu5_1 = self.vgg19((hr.detach() + 1.0) / 2.0)
            per_loss = self.lambda_per * self.per_loss(sr_relu5_1, hr_relu5_1)
            loss = rec_loss + per_loss
            loss.backward()
            self.optimizer.step()
        return rec_loss, per_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    model, vgg19 = MainNet(), Vgg19(requires_grad=False)
    trainer = Trainer(model, vgg19)
    loader = [(torch.rand(2, 3, 6, 6) * 2 - 1, torch.rand(2, 3, 12, 12) * 2 - 1)]
    vgg_before = [p.detach().clone() for p in vgg19.parameters()]
    rec_loss, per_loss = trainer.train(loader)
    assert all(p.grad is None for p in vgg19.parameters())
    assert all(torch.equal(a, b) for a, b in zip(vgg_before, vgg19.parameters()))
    trainer.lambda_rec = 0.0
    trainer.train(loader)
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    print("evidence holds: the frozen VGG is a fixed feature extractor; the perceptual loss still trains the SR network")
