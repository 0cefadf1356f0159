# source: placement matrix
# category: DL304
# expect: clean
# evidence: embed_all() enters torch.no_grad() with `with`, so grad mode is off inside and the returned rows have no grad_fn.
import torch
import torch.nn as nn


def embed_all(f, chunks):
    with torch.no_grad():
        rows = [f(c) for c in chunks]
        return torch.cat(rows), torch.is_grad_enabled()


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(5, 4), nn.GELU(), nn.Linear(4, 2))
    chunks = [torch.randn(4, 5) for _ in range(3)]
    table, grad_mode = embed_all(f, chunks)
    assert grad_mode is False
    assert not table.requires_grad and table.grad_fn is None
    print("evidence holds: with torch.no_grad() -> grad mode off, outputs have no grad_fn")
