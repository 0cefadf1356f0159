# source: https://github.com/karpathy/nn-zero-to-hero/blob/master/lectures/makemore/makemore_part3_bn.ipynb
# category: DL503
# expect: clean
# evidence: every layer output gets retain_grad() before loss.backward(), so layer.out.grad is populated for the gradient statistics
import torch
import torch.nn.functional as F


class Linear:
    def __init__(self, fan_in, fan_out, bias=True):
        self.weight = torch.randn((fan_in, fan_out)) / fan_in ** 0.5
        self.bias = torch.zeros(fan_out) if bias else None

    def __call__(self, x):
        self.out = x @ self.weight
        if self.bias is not None:
            self.out += self.bias
        return self.out

    def parameters(self):
        return [self.weight] + ([] if self.bias is None else [self.bias])


class Tanh:
    def __call__(self, x):
        self.out = torch.tanh(x)
        return self.out

    def parameters(self):
        return []


def build(vocab_size=27, n_embd=10, n_hidden=32, block_size=3):
    C = torch.randn((vocab_size, n_embd))
    layers = [
        Linear(n_embd * block_size, n_hidden), Tanh(),
        Linear(n_hidden, n_hidden), Tanh(),
        Linear(n_hidden, vocab_size),
    ]
    with torch.no_grad():
        layers[-1].weight *= 0.1
        for layer in layers[:-1]:
            if isinstance(layer, Linear):
                layer.weight *= 5 / 3
    parameters = [C] + [p for layer in layers for p in layer.parameters()]
    for p in parameters:
        p.requires_grad = True
    return C, layers, parameters


def train_step(C, layers, parameters, Xb, Yb, lr=0.1):
    emb = C[Xb]
    x = emb.view(emb.shape[0], -1)
    for layer in layers:
        x = layer(x)
    loss = F.cross_entropy(x, Yb)
    for layer in layers:
        layer.out.retain_grad()
    for p in parameters:
        p.grad = None
    loss.backward()
    with torch.no_grad():
        for p in parameters:
            p += -lr * p.grad
    return loss


def backward_pass_stats(layers):
    stats = {}
    for i, layer in enumerate(layers[:-1]):
        if isinstance(layer, Tanh):
            t = layer.out.grad
            stats[i] = (t.mean().item(), t.std().item())
    return stats


if __name__ == "__main__":
    torch.manual_seed(0)
    C, layers, parameters = build()
    Xb = torch.randint(0, 27, (16, 3))
    Yb = torch.randint(0, 27, (16,))
    train_step(C, layers, parameters, Xb, Yb)
    stats = backward_pass_stats(layers)
    assert set(stats) == {1, 3}
    assert all(std > 0 for _, std in stats.values())
    print("evidence holds: retain_grad() on each layer.out makes its .grad available after backward")
