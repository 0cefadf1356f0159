# source: https://github.com/bytetriper/RAE/issues/67
# category: DL601
# expect: clean
# evidence: gradients are summed over grad_accum_steps micro-batches on purpose and zeroed right after each optimizer.step(), so every step sees exactly the sum of its own micro-batch gradients, the weights change, and the EMA copy never gets a gradient.
from collections import OrderedDict
from copy import deepcopy
import torch
import torch.nn as nn


class RAE(nn.Module):
    """frozen representation encoder (stand-in for the DINOv2 encoder of RAE)"""
    def __init__(self, latent_dim=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, latent_dim, 4, 4), nn.GELU())
        self.requires_grad_(False)

    def encode(self, x):
        return self.encoder(x)


class DiT(nn.Module):
    def __init__(self, in_channels=8, hidden_size=16, num_classes=10):
        super().__init__()
        self.x_embedder = nn.Conv2d(in_channels, hidden_size, 1)
        self.t_embedder = nn.Linear(1, hidden_size)
        self.y_embedder = nn.Embedding(num_classes + 1, hidden_size)
        self.final_layer = nn.Conv2d(hidden_size, in_channels, 1)

    def forward(self, x, t, y):
        c = self.t_embedder(t[:, None]) + self.y_embedder(y)
        h = torch.nn.functional.silu(self.x_embedder(x) + c[:, :, None, None])
        return self.final_layer(h)


def mean_flat(x):
    return torch.mean(x, dim=list(range(1, len(x.size()))))


class Transport:
    def training_losses(self, model, x1, model_kwargs=None):
        if model_kwargs is None:
            model_kwargs = {}
        t = torch.rand(x1.shape[0])
        x0 = torch.randn_like(x1)
        xt = t[:, None, None, None] * x1 + (1 - t[:, None, None, None]) * x0
        ut = x1 - x0
        model_output = model(xt, t, **model_kwargs)
        terms = {}
        terms["loss"] = mean_flat((model_output - ut) ** 2)
        return terms


@torch.no_grad()
def update_ema(ema_model, model, decay=0.9999):
    ema_params = OrderedDict(ema_model.named_parameters())
    model_params = OrderedDict(model.named_parameters())
    for name, param in model_params.items():
        ema_params[name].mul_(decay).add_(param.data, alpha=1 - decay)


def main(loader, grad_accum_steps=2, epochs=1, clip_grad=1.0, ema_decay=0.9, step_hook=None):
    rae = RAE().eval()
    model = DiT()
    ema_model = deepcopy(model).requires_grad_(False).eval()
    ddp_model = model  # DistributedDataParallel(model) in the real script
    transport = Transport()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    global_step = 0
    running_loss = 0.0
    optimizer.zero_grad(set_to_none=True)
    for epoch in range(epochs):
        model.train()
        epoch_metrics = {'loss': torch.zeros(())}
        for step, (images, labels) in enumerate(loader):
            with torch.no_grad():
                z = rae.encode(images)
            model_kwargs = dict(y=labels)
            loss = transport.training_losses(ddp_model, z, model_kwargs)["loss"].mean()
            (loss / grad_accum_steps).backward()
            global_step += 1
            if global_step % grad_accum_steps == 0:
                if clip_grad:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_grad)
                if step_hook is not None:
                    step_hook(model)
                optimizer.step()
                scheduler.step()
                update_ema(ema_model, model, decay=ema_decay)
                optimizer.zero_grad(set_to_none=True)
            running_loss += loss.item()
            epoch_metrics['loss'] += loss.detach()
    return model, ema_model, running_loss / max(global_step, 1)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(6)]
    incoming, checks = [], []
    initial = {}

    def step_hook(model):
        p = model.final_layer.weight
        total = sum(g for g in incoming)
        with torch.no_grad():
            # clip_grad_norm_ may only rescale the accumulated sum
            cos = torch.nn.functional.cosine_similarity(p.grad.flatten(), total.flatten(), dim=0)
            checks.append((len(incoming), float(cos)))
        incoming.clear()

    orig_init = DiT.__init__

    def recording_init(self, *a, **k):
        orig_init(self, *a, **k)
        if not initial:
            initial['w'] = self.final_layer.weight.detach().clone()
            self.final_layer.weight.register_hook(lambda g: incoming.append(g.detach().clone()))

    DiT.__init__ = recording_init
    model, ema_model, avg_loss = main(loader, grad_accum_steps=2, step_hook=step_hook)
    assert [n for n, _ in checks] == [2, 2, 2], checks
    assert all(c > 0.9999 for _, c in checks), checks
    assert all(p.grad is None for p in ema_model.parameters())
    with torch.no_grad():
        assert not torch.equal(model.final_layer.weight, initial['w'])
        assert not torch.equal(ema_model.final_layer.weight, initial['w'])
    print("evidence holds: each of the 3 optimizer steps used exactly its 2 micro-batch gradients; weights and EMA moved")
