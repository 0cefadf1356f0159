# source: placement matrix
# category: DL603
# expect: flag 15
# evidence: td_update builds the bootstrapped target through the target copy with grad on; backward fills the copy's .grad.
import copy
import torch
from torch import nn

torch.manual_seed(0)


def td_update(qf, qf_tgt, sgd, batch, gamma):
    obs, act, rew, nxt, term = batch
    pred = qf(obs).gather(1, act[:, None]).squeeze(1)
    y = rew + gamma * (1.0 - term) * qf_tgt(nxt).max(dim=1)[0]
    err = ((pred - y) ** 2).mean()
    sgd.zero_grad()
    err.backward()
    sgd.step()
    return err.item()


if __name__ == "__main__":
    qf = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 3))
    qf_tgt = copy.deepcopy(qf)
    sgd = torch.optim.SGD(qf.parameters(), lr=0.01)
    batch = (torch.randn(6, 3), torch.randint(0, 3, (6,)), torch.randn(6), torch.randn(6, 3), torch.zeros(6))
    td_update(qf, qf_tgt, sgd, batch, 0.9)
    assert all(p.grad is not None for p in qf_tgt.parameters())
    print("evidence holds: the target copy received gradients from the TD loss")
