# source: placement matrix
# category: DL102
# expect: flag 12
# evidence: hard_update rebinds each target parameter's .data to the source's storage, so after the caller's next sgd step the target has moved too: it ends sharing storage with, and equal to, the source.
import copy
import torch
from torch import nn


def hard_update(dst, src):
    for d, s in zip(dst.parameters(), src.parameters()):
        d.data = s.data


def fit(f, f_tgt, sgd, rollout, every):
    for t, (o, u, rw, o2) in enumerate(rollout):
        if t % every == 0:
            hard_update(f_tgt, f)
        with torch.no_grad():
            boot = rw + 0.9 * f_tgt(o2).max(1)[0]
        chosen = f(o).gather(1, u.view(-1, 1)).view(-1)
        sgd.zero_grad()
        nn.functional.mse_loss(chosen, boot).backward()
        sgd.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    f_tgt = copy.deepcopy(f).requires_grad_(False)
    rollout = [(torch.randn(8, 4), torch.randint(0, 2, (8,)), torch.randn(8), torch.randn(8, 4)) for _ in range(4)]
    fit(f, f_tgt, torch.optim.SGD(f.parameters(), lr=0.1), rollout, every=2)
    # last sync at t == 2, then t == 3 stepped only f: f_tgt should lag behind
    assert all(a.data_ptr() == b.data_ptr() for a, b in zip(f_tgt.parameters(), f.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(f_tgt.parameters(), f.parameters()))
    print("evidence holds: the .data rebind in hard_update aliased the target to the source (sgd moved the target)")
