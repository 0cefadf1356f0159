# source: https://github.com/pytorch/pytorch/issues/2384
# category: DL503
# expect: flag 41
# evidence: after loss.backward() the input (a requires_grad leaf) has its .grad but the conv output returned by inspect_layer_gradients() has .grad None
import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 5)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        feat = self.conv(x)
        return self.fc(F.adaptive_avg_pool2d(feat, 1).flatten(1)), feat


def train_step(model, optimizer, images, labels):
    optimizer.zero_grad()
    logits, _ = model(images)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def inspect_layer_gradients(model, images):
    """Look at how the gradient passes from the conv output back to the input."""
    input = images.clone().requires_grad_(True)
    m = model.conv
    output = m(input)
    loss = torch.sum(output)
    m.zero_grad()
    loss.backward()
    report = {
        "input_grad_size": tuple(input.grad.size()),
        "weight_grad_norm": m.weight.grad.norm().item(),
        "output_grad": output.grad,
    }
    print(type(input), report["input_grad_size"])
    print(type(output), report["output_grad"])
    return report


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    images, labels = torch.randn(4, 3, 12, 12), torch.randint(0, 10, (4,))
    train_step(model, optimizer, images, labels)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = inspect_layer_gradients(model, images)
    assert report["input_grad_size"] == (4, 3, 12, 12)
    assert report["output_grad"] is None
    assert any("not a leaf Tensor is being accessed" in str(w.message) for w in caught)
    print("evidence holds: the conv output is a non-leaf; its .grad is None while the input's grad is populated")
