# source: placement matrix
# category: DL304
# expect: flag 10
# evidence: embed_all() calls torch.no_grad() as a bare statement, so grad mode stays on and every returned row carries a grad_fn.
import torch
import torch.nn as nn


def embed_all(f, chunks):
    torch.no_grad()
    rows = [f(c) for c in chunks]
    return torch.cat(rows), torch.is_grad_enabled()


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(5, 4), nn.GELU(), nn.Linear(4, 2))
    chunks = [torch.randn(4, 5) for _ in range(3)]
    table, grad_mode = embed_all(f, chunks)
    assert grad_mode is True
    assert table.requires_grad and table.grad_fn is not None
    print("evidence holds: bare torch.no_grad() -> grad mode still on, outputs have grad_fn")
