# source: placement matrix
# category: DL201
# expect: clean
# evidence: train() feeds the encoder's output to the head uncut, so the encoder gets gradients and Adam moves it.
import torch
import torch.nn as nn


def train(encoder, head, opt, batches):
    for x, y in batches:
        opt.zero_grad()
        feats = encoder(x)
        loss_val = nn.functional.nll_loss(torch.log_softmax(head(feats), dim=1), y)
        loss_val.backward()
        opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(6, 5), nn.Sigmoid())
    head = nn.Linear(5, 3)
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=0.01)
    data = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
    enc0 = [p.detach().clone() for p in encoder.parameters()]
    train(encoder, head, opt, data)
    assert all(p.grad is not None for p in encoder.parameters())
    assert not any(torch.equal(p, q) for p, q in zip(encoder.parameters(), enc0)), "encoder frozen"
    assert head.weight.grad is not None
    print("evidence holds: gradients reach the encoder and Adam trains it")
