# source: https://github.com/facebookresearch/moco/issues/21
# category: DL204
# expect: flag 37, 50, 68
# evidence: without the clone, _dequeue_and_enqueue overwrites the queue that l_neg saved for backward; loss.backward() raises "modified by an inplace operation"
import torch
import torch.nn as nn


class MoCo(nn.Module):
    """MoCo with the negative logits read from the queue without a copy."""

    def __init__(self, base_encoder, dim=8, K=16, m=0.999, T=0.07):
        super(MoCo, self).__init__()
        self.K = K
        self.m = m
        self.T = T
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        with torch.no_grad():
            for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                param_k.copy_(param_q)
                param_k.requires_grad = False
        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.mul_(self.m).add_(param_q, alpha=1. - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K
        self.queue_ptr[0] = ptr

    def forward(self, im_q, im_k):
        q = self.encoder_q(im_q)
        q = nn.functional.normalize(q, dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = self.encoder_k(im_k)
            k = nn.functional.normalize(k, dim=1)

        l_pos = torch.einsum('nc,nc->n', [q, k]).unsqueeze(-1)
        l_neg = torch.einsum('nc,ck->nk', [q, self.queue.detach()])
        logits = torch.cat([l_pos, l_neg], dim=1)
        logits /= self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


def mlp_encoder(num_classes):
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, num_classes))


def train(train_loader, model, criterion, optimizer):
    model.train()
    for i, (images, _) in enumerate(train_loader):
        output, target = model(im_q=images[0], im_k=images[1])
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MoCo(mlp_encoder)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9)
    loader = [((torch.randn(4, 12), torch.randn(4, 12)), None)]
    try:
        train(loader, model, nn.CrossEntropyLoss(), optimizer)
    except RuntimeError as err:
        assert "one of the variables needed for gradient computation has been modified by an inplace operation" in str(err)
    else:
        raise AssertionError("backward should notice the queue update")
    print("evidence holds: self.queue.detach() shares storage with the queue the enqueue step overwrites before backward")
