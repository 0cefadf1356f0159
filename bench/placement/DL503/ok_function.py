# source: placement matrix
# category: DL503
# expect: clean
# evidence: with retain_grad() the function returns a populated gradient of the intermediate activation.
import torch

torch.manual_seed(0)


def saliency(f, batch):
    h = f[0](batch)
    h.retain_grad()
    out = f[2](f[1](h)).sum()
    out.backward()
    return h.grad


if __name__ == "__main__":
    f = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    batch = torch.randn(4, 5)
    g = saliency(f, batch)
    assert g is not None and g.shape == (4, 6)
    assert f[0].weight.grad is not None
    print("evidence holds: the intermediate's gradient is returned")
