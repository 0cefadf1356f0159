# source: https://github.com/sthalles/PyTorch-BYOL/blob/master/trainer.py
# category: DL102
# expect: clean
# evidence: the target network follows the online network through param_k.data = ... (momentum update) while the online network and predictor keep receiving gradients and training.
import copy

import torch
import torch.nn.functional as F
from torch import nn


class MLPHead(nn.Module):
    def __init__(self, in_channels, mlp_hidden_size, projection_size):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_channels, mlp_hidden_size),
            nn.BatchNorm1d(mlp_hidden_size),
            nn.ReLU(inplace=True),
            nn.Linear(mlp_hidden_size, projection_size),
        )

    def forward(self, x):
        return self.net(x)


class ResNetLike(nn.Module):
    def __init__(self, in_dim=12, feat_dim=16, mlp_hidden_size=32, projection_size=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, feat_dim), nn.ReLU())
        self.projetion = MLPHead(feat_dim, mlp_hidden_size, projection_size)

    def forward(self, x):
        h = self.encoder(x)
        return self.projetion(h)


class BYOLTrainer:
    def __init__(self, online_network, target_network, predictor, optimizer, device, **params):
        self.online_network = online_network
        self.target_network = target_network
        self.optimizer = optimizer
        self.device = device
        self.predictor = predictor
        self.max_epochs = params['max_epochs']
        self.m = params['m']
        self.batch_size = params['batch_size']

    @torch.no_grad()
    def _update_target_network_parameters(self):
        """Momentum update of the key encoder"""
        for param_q, param_k in zip(self.online_network.parameters(), self.target_network.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1. - self.m)

    @staticmethod
    def regression_loss(x, y):
        x = F.normalize(x, dim=1)
        y = F.normalize(y, dim=1)
        return -2 * (x * y).sum(dim=-1)

    def initializes_target_network(self):
        for param_q, param_k in zip(self.online_network.parameters(), self.target_network.parameters()):
            param_k.data.copy_(param_q.data)  # initialize
            param_k.requires_grad = False  # not update by gradient

    def train(self, train_loader):
        niter = 0
        self.initializes_target_network()
        for epoch_counter in range(self.max_epochs):
            for (batch_view_1, batch_view_2), _ in train_loader:
                batch_view_1 = batch_view_1.to(self.device)
                batch_view_2 = batch_view_2.to(self.device)

                loss = self.update(batch_view_1, batch_view_2)

                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

                self._update_target_network_parameters()  # update the key encoder
                niter += 1
        return niter

    def update(self, batch_view_1, batch_view_2):
        predictions_from_view_1 = self.predictor(self.online_network(batch_view_1))
        predictions_from_view_2 = self.predictor(self.online_network(batch_view_2))

        with torch.no_grad():
            targets_to_view_2 = self.target_network(batch_view_1)
            targets_to_view_1 = self.target_network(batch_view_2)

        loss = self.regression_loss(predictions_from_view_1, targets_to_view_1)
        loss += self.regression_loss(predictions_from_view_2, targets_to_view_2)
        return loss.mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device('cpu')
    online_network = ResNetLike().to(device)
    predictor = MLPHead(in_channels=8, mlp_hidden_size=32, projection_size=8).to(device)
    target_network = copy.deepcopy(online_network)
    optimizer = torch.optim.SGD(list(online_network.parameters()) + list(predictor.parameters()), lr=0.05, momentum=0.9)

    base = torch.randn(6, 8, 12)
    train_loader = [((b + 0.1 * torch.randn_like(b), b + 0.1 * torch.randn_like(b)), None) for b in base]

    trainer = BYOLTrainer(online_network=online_network, target_network=target_network, predictor=predictor,
                          optimizer=optimizer, device=device, max_epochs=2, m=0.9, batch_size=8)
    online_before = [p.detach().clone() for p in online_network.parameters()]
    target_before = [p.detach().clone() for p in target_network.parameters()]
    trainer.train(train_loader)

    with torch.no_grad():
        assert all(p.grad is not None for p in online_network.parameters())
        assert all(p.grad is not None for p in predictor.parameters())
        assert any(not torch.equal(a, p) for a, p in zip(online_before, online_network.parameters()))
        assert any(not torch.equal(a, p) for a, p in zip(target_before, target_network.parameters()))
        assert all(not p.requires_grad for p in target_network.parameters())
        # the target is a moving average: it stays between its start and the online weights
        w_on, w_tg, w_0 = online_network.encoder[0].weight, target_network.encoder[0].weight, target_before[0]
        assert (w_tg - w_on).norm() < (w_0 - w_on).norm()
    print("evidence holds: online network trains and the target follows it through the .data momentum assignment")
