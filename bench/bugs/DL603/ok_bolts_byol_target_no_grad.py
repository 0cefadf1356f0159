# source: https://github.com/Lightning-Universe/lightning-bolts/issues/801
# category: DL603
# expect: clean
# evidence: the target_network outputs z2 are computed under torch.no_grad(), so although Adam is built on self.parameters() the target weights get grad None and move only through the BYOLMAWeightUpdate moving average, while the online network trains.
import math
from copy import deepcopy
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam


class MLP(nn.Module):
    def __init__(self, input_dim=16, hidden_size=32, output_dim=8):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(input_dim, hidden_size, bias=False), nn.BatchNorm1d(hidden_size),
                                   nn.ReLU(inplace=True), nn.Linear(hidden_size, output_dim, bias=True))

    def forward(self, x):
        return self.model(x)


class SiameseArm(nn.Module):
    def __init__(self, encoder=None):
        super().__init__()
        if encoder is None:
            encoder = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.encoder = encoder
        self.projector = MLP(16, 32, 8)
        self.predictor = MLP(8, 32, 8)

    def forward(self, x):
        y = self.encoder(x)
        z = self.projector(y)
        h = self.predictor(z)
        return y, z, h


class BYOLMAWeightUpdate:
    def __init__(self, initial_tau: float = 0.996):
        self.initial_tau = initial_tau
        self.current_tau = initial_tau

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx):
        online_net = pl_module.online_network
        target_net = pl_module.target_network
        self.update_weights(online_net, target_net)
        self.current_tau = self.update_tau(pl_module, trainer)

    def update_tau(self, pl_module, trainer) -> float:
        max_steps = len(trainer.train_dataloader) * trainer.max_epochs
        tau = 1 - (1 - self.initial_tau) * (math.cos(math.pi * pl_module.global_step / max_steps) + 1) / 2
        return tau

    def update_weights(self, online_net, target_net) -> None:
        for (name, online_p), (_, target_p) in zip(online_net.named_parameters(), target_net.named_parameters()):
            target_p.data = self.current_tau * target_p.data + (1 - self.current_tau) * online_p.data


class BYOL(nn.Module):
    def __init__(self, num_classes, learning_rate: float = 0.2, weight_decay: float = 1.5e-6, **kwargs):
        super().__init__()
        self.hparams = dict(num_classes=num_classes, learning_rate=learning_rate, weight_decay=weight_decay)
        self.online_network = SiameseArm()
        self.target_network = deepcopy(self.online_network)
        self.weight_callback = BYOLMAWeightUpdate()
        self.global_step = 0

    def on_train_batch_end(self, outputs, batch, batch_idx, dataloader_idx=0):
        self.weight_callback.on_train_batch_end(self.trainer, self, outputs, batch, batch_idx, dataloader_idx)

    def forward(self, x):
        y, _, _ = self.online_network(x)
        return y

    def shared_step(self, batch, batch_idx):
        imgs, y = batch
        img_1, img_2 = imgs[:2]
        # Image 1 to image 2 loss
        y1, z1, h1 = self.online_network(img_1)
        with torch.no_grad():
            y2, z2, h2 = self.target_network(img_2)
        loss_a = -2 * F.cosine_similarity(h1, z2).mean()
        # Image 2 to image 1 loss
        y1, z1, h1 = self.online_network(img_2)
        with torch.no_grad():
            y2, z2, h2 = self.target_network(img_1)
        loss_b = -2 * F.cosine_similarity(h1, z2).mean()
        # Final loss
        total_loss = loss_a + loss_b
        return loss_a, loss_b, total_loss

    def training_step(self, batch, batch_idx):
        loss_a, loss_b, total_loss = self.shared_step(batch, batch_idx)
        return total_loss

    def configure_optimizers(self):
        return Adam(self.parameters(), lr=self.hparams['learning_rate'], weight_decay=self.hparams['weight_decay'])


class Trainer:
    """the few pieces of pl.Trainer.fit that BYOL relies on"""
    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs

    def fit(self, model, train_dataloader):
        self.train_dataloader = train_dataloader
        model.trainer = self
        optimizer = model.configure_optimizers()
        model.train()
        for epoch in range(self.max_epochs):
            for batch_idx, batch in enumerate(train_dataloader):
                loss = model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                model.on_train_batch_end(loss.detach(), batch, batch_idx)
                model.global_step += 1
        return optimizer


if __name__ == "__main__":
    torch.manual_seed(0)
    model = BYOL(num_classes=10, learning_rate=1e-2)
    train_dataloader = [((torch.randn(8, 3, 8, 8), torch.randn(8, 3, 8, 8)), torch.randint(0, 10, (8,)))
                        for _ in range(3)]
    online_before = deepcopy(model.online_network.state_dict())
    target_w = model.target_network.projector.model[0].weight
    steps = []
    tau_seen = []
    update_weights = model.weight_callback.update_weights

    def recording_update_weights(online_net, target_net):
        with torch.no_grad():
            expected = (model.weight_callback.current_tau * target_w
                        + (1 - model.weight_callback.current_tau) * online_net.projector.model[0].weight)
        update_weights(online_net, target_net)
        with torch.no_grad():
            steps.append(torch.allclose(target_w, expected, atol=1e-7))

    model.weight_callback.update_weights = recording_update_weights
    optimizer = Trainer(max_epochs=1).fit(model, train_dataloader)
    assert any(p is target_w for g in optimizer.param_groups for p in g['params'])
    assert all(p.grad is None for p in model.target_network.parameters())
    assert all(p.grad is not None for p in model.online_network.parameters())
    with torch.no_grad():
        assert not torch.equal(model.online_network.projector.model[0].weight,
                               online_before['projector.model.0.weight'])
    assert steps == [True, True, True]
    print("evidence holds: target network gets no gradient and follows the EMA exactly; online network trains")
