# source: placement matrix
# category: DL201
# expect: clean
# evidence: the encoder is frozen on purpose (requires_grad_(False), not given to self.opt) before the features are rebuilt with torch.tensor(...tolist()); only the head is optimised and it trains.
import torch


class Trainer:
    def __init__(self, encoder, head):
        self.encoder = encoder.requires_grad_(False)
        self.head = head
        self.opt = torch.optim.Adam(head.parameters(), lr=0.01)

    def update(self, x, y):
        self.opt.zero_grad()
        feats = torch.tensor(self.encoder(x).tolist())
        out = torch.nn.functional.mse_loss(self.head(feats), y)
        out.backward()
        self.opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    tr = Trainer(encoder, torch.nn.Linear(4, 1))
    enc0 = [p.detach().clone() for p in encoder.parameters()]
    head0 = tr.head.weight.detach().clone()
    for _ in range(3):
        tr.update(torch.randn(8, 3), torch.randn(8, 1))
    owned = {id(p) for g in tr.opt.param_groups for p in g["params"]}
    assert not any(p.requires_grad or id(p) in owned for p in encoder.parameters())
    assert all(torch.equal(p, q) for p, q in zip(encoder.parameters(), enc0))
    assert tr.head.weight.grad is not None and not torch.equal(tr.head.weight, head0)
    print("evidence holds: the encoder is frozen explicitly and owned by no optimizer; the head trains")
