# source: https://github.com/yueliu1999/HSAN/issues/6
# category: DL601
# expect: flag 76, 83, 84
# evidence: the gradient each Adam step uses is the running sum of every earlier epoch's gradient, not the current one
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim


class hard_sample_aware_network(nn.Module):
    def __init__(self, input_dim, hidden_dim, act, n_num):
        super().__init__()
        self.AE1 = nn.Linear(input_dim, hidden_dim)
        self.AE2 = nn.Linear(input_dim, hidden_dim)
        self.SE1 = nn.Linear(n_num, hidden_dim)
        self.SE2 = nn.Linear(n_num, hidden_dim)
        self.alpha = nn.Parameter(torch.Tensor(1, ))
        self.alpha.data = torch.tensor(0.99999)
        self.pos_weight = torch.ones(n_num * 2)
        self.pos_neg_weight = torch.ones([n_num * 2, n_num * 2])
        self.act = nn.PReLU() if act == "prelu" else nn.Identity()

    def forward(self, x, A):
        Z1 = self.act(self.AE1(x))
        Z2 = self.act(self.AE2(x))
        Z1 = F.normalize(Z1, dim=1, p=2)
        Z2 = F.normalize(Z2, dim=1, p=2)
        E1 = F.normalize(self.SE1(A), dim=1, p=2)
        E2 = F.normalize(self.SE2(A), dim=1, p=2)
        return Z1, Z2, E1, E2


def comprehensive_similarity(Z1, Z2, E1, E2, alpha):
    Z1_Z2 = torch.cat([torch.cat([Z1 @ Z1.T, Z1 @ Z2.T], dim=1),
                       torch.cat([Z2 @ Z1.T, Z2 @ Z2.T], dim=1)], dim=0)
    E1_E2 = torch.cat([torch.cat([E1 @ E1.T, E1 @ E2.T], dim=1),
                       torch.cat([E2 @ E1.T, E2 @ E2.T], dim=1)], dim=0)
    return alpha * Z1_Z2 + (1 - alpha) * E1_E2


def hard_sample_aware_infoNCE(S, M, pos_neg_weight, pos_weight, node_num):
    pos_neg = M * torch.exp(S * pos_neg_weight)
    pos = torch.cat([torch.diag(S, node_num), torch.diag(S, -node_num)], dim=0)
    pos = torch.exp(pos * pos_weight)
    neg = (torch.sum(pos_neg, dim=1) - pos)
    infoNEC = (-torch.log(pos / (pos + neg))).sum() / (2 * node_num)
    return infoNEC


def laplacian_filtering(A, X, t):
    A_tmp = A + torch.eye(A.shape[0])
    D = torch.diag(A_tmp.sum(1) ** -0.5)
    L = torch.eye(A.shape[0]) - D @ A_tmp @ D
    for _ in range(t):
        X = (torch.eye(A.shape[0]) - L) @ X
    return X


class Args:
    dims = 8
    activate = "ident"
    lr = 1e-3
    t = 2
    epochs = 6


def train(args, X, A):
    node_num = X.shape[0]
    X_filtered = laplacian_filtering(A, X, args.t)

    HSAN = hard_sample_aware_network(input_dim=X.shape[1], hidden_dim=args.dims, act=args.activate, n_num=node_num)
    optimizer = optim.Adam(HSAN.parameters(), lr=args.lr)
    mask = torch.ones([node_num * 2, node_num * 2]) - torch.eye(node_num * 2)

    for epoch in range(args.epochs):
        HSAN.train()

        Z1, Z2, E1, E2 = HSAN(X_filtered, A)
        S = comprehensive_similarity(Z1, Z2, E1, E2, HSAN.alpha)
        loss = hard_sample_aware_infoNCE(S, mask, HSAN.pos_neg_weight, HSAN.pos_weight, node_num)

        loss.backward()
        optimizer.step()
    return HSAN, optimizer


if __name__ == "__main__":
    torch.manual_seed(0)
    n, d = 10, 6
    X = torch.randn(n, d)
    A = (torch.rand(n, n) > 0.6).float()
    A = ((A + A.T) > 0).float()

    fresh, stepped = [], []
    original_init = optim.Adam.__init__

    def recording_init(self, params, *a, **kw):
        params = list(params)
        original_init(self, params, *a, **kw)
        w = params[0]  # AE1.weight
        w.register_hook(lambda g: fresh.append(g.detach().clone()))
        self.register_step_pre_hook(lambda opt, args, kwargs: stepped.append(w.grad.detach().clone()))

    optim.Adam.__init__ = recording_init
    train(Args(), X, A)
    optim.Adam.__init__ = original_init

    assert len(fresh) == len(stepped) == Args.epochs
    for k in range(1, Args.epochs):
        assert torch.allclose(stepped[k], torch.stack(fresh[: k + 1]).sum(0), atol=1e-6)
        assert not torch.allclose(stepped[k], fresh[k], atol=1e-6)
    print("evidence holds: every Adam step sees the sum of all earlier epochs' gradients, never zeroed")
