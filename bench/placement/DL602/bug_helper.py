# source: placement matrix
# category: DL602
# expect: flag 19
# evidence: the helper returns the generator's samples, the caller feeds them to the discriminator loss without detach; the generator step raises "Trying to backward through the graph a second time".
import torch
from torch import nn

torch.manual_seed(0)


def sample(net_g, n):
    return net_g(torch.randn(n, 4))


def train_pair(net_g, net_d, sgd_g, sgd_d, real):
    loss_fn = nn.BCEWithLogitsLoss()
    x_fake = sample(net_g, real.shape[0])
    sgd_d.zero_grad()
    ld = loss_fn(net_d(real), torch.ones(real.shape[0], 1)) + loss_fn(net_d(x_fake), torch.zeros(real.shape[0], 1))
    ld.backward()
    sgd_d.step()
    sgd_g.zero_grad()
    lg = loss_fn(net_d(x_fake), torch.ones(real.shape[0], 1))
    lg.backward()
    sgd_g.step()


if __name__ == "__main__":
    net_g = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    net_d = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
    sgd_g = torch.optim.SGD(net_g.parameters(), lr=0.01)
    sgd_d = torch.optim.SGD(net_d.parameters(), lr=0.01)
    try:
        train_pair(net_g, net_d, sgd_g, sgd_d, torch.randn(7, 2))
        problem = None
    except RuntimeError as e:
        problem = str(e)
    assert problem is not None and "Trying to backward through the graph a second time" in problem
    print("evidence holds: the generator step raised after the discriminator loss freed the helper's graph")
