# source: https://github.com/facebookresearch/moco/blob/main/moco/builder.py
# category: DL201
# expect: clean
# evidence: encoder_q gets gradients and trains; encoder_k (requires_grad=False, computed under no_grad) gets none but still moves through the momentum update
import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallResNet(nn.Module):
    def __init__(self, num_classes=8):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(self.body(x))


class MoCo(nn.Module):
    def __init__(self, base_encoder, dim=8, K=32, m=0.999, T=0.07):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.mul_(self.m).add_(param_q.data, alpha=1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + batch_size] = keys.T
        self.queue_ptr[0] = (ptr + batch_size) % self.K

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


def train(loader, model, criterion, optimizer):
    model.train()
    for images in loader:
        output, target = model(im_q=images[0], im_k=images[1])
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MoCo(SmallResNet, m=0.9)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
    loader = [(torch.randn(4, 3, 8, 8), torch.randn(4, 3, 8, 8)) for _ in range(3)]
    q_before = model.encoder_q.fc.weight.detach().clone()
    k_before = model.encoder_k.fc.weight.detach().clone()
    train(loader, model, nn.CrossEntropyLoss(), optimizer)
    assert all(p.grad is not None for p in model.encoder_q.parameters())
    assert all(p.grad is None for p in model.encoder_k.parameters())
    assert not torch.equal(q_before, model.encoder_q.fc.weight)
    assert not torch.equal(k_before, model.encoder_k.fc.weight)
    print("evidence holds: the query encoder trains by gradient; the key encoder is an explicitly frozen momentum copy")
