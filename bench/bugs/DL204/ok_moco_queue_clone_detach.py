# source: https://github.com/Lightning-Universe/lightning-bolts/blob/master/pl_bolts/models/self_supervised/moco/moco_module.py
# category: DL204
# expect: clean
# evidence: l_neg uses queue.clone().detach(); the in-place enqueue before the loss leaves backward intact and encoder_q trains
import torch
from torch import nn
from torch.nn import functional as F


class MoCo(nn.Module):
    """MoCo v2: query encoder, momentum key encoder, and a queue of negative keys."""

    def __init__(self, emb_dim=8, num_negatives=16, encoder_momentum=0.999, softmax_temperature=0.07):
        super().__init__()
        self.emb_dim = emb_dim
        self.num_negatives = num_negatives
        self.encoder_momentum = encoder_momentum
        self.softmax_temperature = softmax_temperature
        self.encoder_q, self.encoder_k = self.init_encoders()
        with torch.no_grad():
            for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                param_k.copy_(param_q)
                param_k.requires_grad = False
        self.register_buffer("queue", torch.randn(emb_dim, num_negatives))
        self.queue = nn.functional.normalize(self.queue, dim=0)
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    def init_encoders(self):
        def make():
            return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, self.emb_dim))
        return make(), make()

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        em = self.encoder_momentum
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.mul_(em).add_(param_q, alpha=1.0 - em)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys, queue_ptr, queue):
        batch_size = keys.shape[0]
        ptr = int(queue_ptr)
        assert self.num_negatives % batch_size == 0
        queue[:, ptr: ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.num_negatives
        queue_ptr[0] = ptr

    def forward(self, img_q, img_k, queue):
        q = self.encoder_q(img_q)
        q = nn.functional.normalize(q, dim=1)
        with torch.no_grad():
            k = self.encoder_k(img_k)
            k = nn.functional.normalize(k, dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1)
        logits /= self.softmax_temperature
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        return logits, labels, k

    def training_step(self, batch, batch_idx):
        (img_1, img_2), _ = batch
        self._momentum_update_key_encoder()
        output, target, keys = self(img_q=img_1, img_k=img_2, queue=self.queue)
        self._dequeue_and_enqueue(keys, queue=self.queue, queue_ptr=self.queue_ptr)
        loss = F.cross_entropy(output.float(), target.long())
        return loss


def fit(model, batches):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
    for batch_idx, batch in enumerate(batches):
        loss = model.training_step(batch, batch_idx)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MoCo()
    queue_before = model.queue.clone()
    fit(model, [((torch.randn(4, 12), torch.randn(4, 12)), None) for _ in range(2)])
    assert not torch.equal(queue_before[:, :8], model.queue[:, :8])  # the queue was updated in place
    assert model.encoder_q[0].weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.encoder_k.parameters())
    print("evidence holds: the queue copy saved for backward is not the buffer the enqueue step overwrites")
