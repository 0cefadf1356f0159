# source: placement matrix
# category: DL503
# expect: flag 14
# evidence: the function returns the .grad of an intermediate activation, which is None after backward.
import torch

torch.manual_seed(0)


def saliency(f, batch):
    h = f[0](batch)
    out = f[2](f[1](h)).sum()
    out.backward()
    return h.grad


if __name__ == "__main__":
    f = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    batch = torch.randn(4, 5)
    g = saliency(f, batch)
    assert g is None
    assert f[0].weight.grad is not None
    print("evidence holds: the intermediate's .grad is None although backward reached the weights")
