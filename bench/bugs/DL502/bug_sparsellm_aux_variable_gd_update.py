# source: https://github.com/BaiTheBest/SparseLLM/issues/13
# category: DL502
# expect: flag 30
# evidence: the gradient-descent update of the auxiliary variable s_batch (a requires_grad leaf) raises "a leaf Variable that requires grad is being used in an in-place operation." and s is left unchanged
import torch
import torch.nn as nn
import torch.nn.functional as F


class LlamaMLP(nn.Module):
    def __init__(self, hidden=8, inter=16):
        super().__init__()
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)


def update_s(mlp, s, z, target, s_learning_rate=0.1, chunk_size=4, n_iters=2):
    """Update the pre-activation s chunk by chunk so that down_proj(act(s)) fits the target
    while s stays close to z = up_proj(x)."""
    W_down = mlp.down_proj.weight.detach().float()
    for chunk_start in range(0, s.shape[1], chunk_size):
        chunk = slice(chunk_start, chunk_start + chunk_size)
        s_batch = s[:, chunk].clone().float().requires_grad_(True)
        z_batch = z[:, chunk].float()
        for _ in range(n_iters):
            s_full = s.float().clone()
            s_full[:, chunk] = s_batch
            loss_s = F.mse_loss(F.silu(s_full) @ W_down.t(), target) + F.mse_loss(s_batch, z_batch)
            loss_s.backward()
            s_batch -= s_learning_rate * s_batch.grad
            s_batch.grad.zero_()
        s[:, chunk] = s_batch.detach().to(dtype=torch.float16)
    return s


def prune_layer(mlp, inps, outs):
    with torch.no_grad():
        z = mlp.up_proj(inps).half()
    s = z.clone()
    return update_s(mlp, s, z, outs.float())


if __name__ == "__main__":
    torch.manual_seed(0)
    mlp = LlamaMLP()
    inps = torch.randn(6, 8)
    outs = torch.randn(6, 8)
    try:
        prune_layer(mlp, inps, outs)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised == "a leaf Variable that requires grad is being used in an in-place operation.", raised
    print("evidence holds: s_batch -= lr * s_batch.grad on the requires_grad leaf raises the leaf in-place error")
