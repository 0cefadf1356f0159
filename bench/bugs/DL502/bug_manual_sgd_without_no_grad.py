# source: https://hao-yiwen.github.io/yiwen-blog-website/en/docs/ai/frameworks/pytorch/common-errors
# category: DL502
# expect: flag 23
# evidence: the hand-written gradient-descent step p -= lr * p.grad runs outside torch.no_grad() on nn.Linear parameters (leaves that require grad) and raises "a leaf Variable that requires grad is being used in an in-place operation".
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Linear(3, 1)
criterion = nn.MSELoss()
lr = 0.01
data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]


def train():
    for x, y in data:
        pred = model(x)
        loss = criterion(pred, y)
        loss.backward()

        for p in model.parameters():
            p -= lr * p.grad  # in-place update without torch.no_grad()
            p.grad.zero_()


if __name__ == "__main__":
    before = model.weight.detach().clone()
    try:
        train()
    except RuntimeError as e:
        assert "a leaf Variable that requires grad is being used in an in-place operation" in str(e), str(e)
        with torch.no_grad():
            assert torch.equal(before, model.weight)
        print("evidence holds: p -= lr * p.grad raised the leaf-Variable in-place RuntimeError")
    else:
        raise AssertionError("in-place update did not raise")
