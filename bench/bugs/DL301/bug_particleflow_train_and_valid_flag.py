# source: https://github.com/jpata/particleflow/pull/290
# category: DL301
# expect: flag 55, 58
# evidence: train_and_valid(..., is_train=False) puts the model in eval mode but runs the forward pass of every validation batch with grad enabled (only the backward is guarded by is_train): the predictions carry grad_fns and autograd saves activations, so large validation batches OOM
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLPF(nn.Module):
    def __init__(self, input_dim=6, num_classes=4, width=16):
        super().__init__()
        self.nn_encode = nn.Sequential(nn.Linear(input_dim, width), nn.ELU(), nn.Linear(width, width))
        self.nn_id = nn.Linear(width, num_classes)
        self.nn_momentum = nn.Linear(width + num_classes, 3)

    def forward(self, X, mask):
        h = self.nn_encode(X) * mask.unsqueeze(-1)
        preds_id = self.nn_id(h)
        preds_momentum = self.nn_momentum(torch.cat([h, preds_id], dim=-1))
        return preds_id, preds_momentum


class Batch(object):
    def __init__(self, X, mask, ygen_id, ygen_momentum):
        self.X, self.mask, self.ygen_id, self.ygen_momentum = X, mask, ygen_id, ygen_momentum

    def to(self, rank, non_blocking=False):
        return self


def mlpf_loss(ygen_id, ygen_momentum, ypred_id, ypred_momentum, mask):
    loss = {}
    loss["Classification"] = 100 * F.cross_entropy(ypred_id[mask], ygen_id[mask])
    loss["Regression"] = 10 * F.huber_loss(ypred_momentum[mask], ygen_momentum[mask])
    loss["Total"] = loss["Classification"] + loss["Regression"]
    return loss


def train_and_valid(rank, model, optimizer, data_loader, is_train=True, epoch=None):
    """
    Performs training over a given epoch. Will run a validation step every N_STEPS and after the last training batch.
    """
    train_or_valid = "train" if is_train else "valid"
    print(f"Initiating epoch #{epoch} {train_or_valid} run on device rank={rank}")

    # this one will keep accumulating `train_loss` and then return the average
    epoch_loss = {}

    if is_train:
        model.train()
    else:
        model.eval()

    for itrain, batch in enumerate(data_loader):
        batch = batch.to(rank, non_blocking=True)

        ypred_id, ypred_momentum = model(batch.X, batch.mask)
        loss = mlpf_loss(batch.ygen_id, batch.ygen_momentum, ypred_id, ypred_momentum, batch.mask)

        if is_train:
            for param in model.parameters():
                param.grad = None
            loss["Total"].backward()
            optimizer.step()

        for loss_ in loss.keys():
            if loss_ not in epoch_loss:
                epoch_loss[loss_] = 0.0
            epoch_loss[loss_] += loss[loss_].detach()

    for loss_ in epoch_loss:
        epoch_loss[loss_] = epoch_loss[loss_].cpu().item() / len(data_loader)
    return epoch_loss


def make_loader(n):
    loader = []
    for _ in range(n):
        mask = torch.rand(2, 5) > 0.2
        mask[:, 0] = True
        loader.append(Batch(torch.randn(2, 5, 6), mask, torch.randint(0, 4, (2, 5)), torch.randn(2, 5, 3)))
    return loader


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MLPF()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train_and_valid("cpu", model, optimizer, make_loader(2), is_train=True, epoch=0)
    preds = []
    model.register_forward_hook(lambda mod, inp, out: preds.append(out[0]))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        losses_v = train_and_valid("cpu", model, optimizer, make_loader(3), is_train=False, epoch=0)
    assert not model.training and len(preds) == 3 and all(p.grad_fn is not None for p in preds)
    assert sum(saved) > 0
    print("evidence holds: the validation run (is_train=False) built %d graphs: predictions carry grad_fns, %d bytes saved"
          % (len(preds), sum(saved)))
