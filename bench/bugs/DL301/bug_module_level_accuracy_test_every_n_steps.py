# source: https://github.com/pytorch/pytorch/issues/4050
# category: DL301
# expect: flag 47
# evidence: the periodic accuracy test in the module-level loop runs the model with autograd on; `out` keeps a full graph alive into the next training step although no backward is ever called on it.
import random

import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)
random.seed(0)


class P3D199(nn.Module):
    """Tiny stand-in for the pseudo-3D ResNet used in the report."""

    def __init__(self, num_classes=101):
        super().__init__()
        self.features = nn.Sequential(nn.Conv3d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool3d(1))
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


def read_batch(files, labels, batch_size=2):
    idx = random.sample(range(len(files)), batch_size)
    data = torch.stack([files[i] for i in idx])
    return data, torch.tensor([labels[i] for i in idx])


files = [torch.randn(3, 4, 8, 8) for _ in range(6)]
labels = [random.randrange(101) for _ in range(6)]
test_files, test_labels = files[:3], labels[:3]

model = P3D199(num_classes=101)
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

step = 12
test_flags = []
i = 1
while i < step:
    if i % 5 == 0:
        test_data, test_label = read_batch(test_files, test_labels)
        out = model(torch.autograd.Variable(test_data.float()))
        _, predict_label = torch.max(out, dim=1)
        eq = torch.eq(predict_label, torch.autograd.Variable(test_label))
        print(eq)
        test_flags.append((out.requires_grad, type(out.grad_fn).__name__))
    else:
        data, data_label = read_batch(files, labels)
        out = model(torch.autograd.Variable(data.float()))
        loss = criterion(out, torch.autograd.Variable(data_label, requires_grad=False))
        print(i, loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    i = i + 1


if __name__ == "__main__":
    assert len(test_flags) == 2
    assert all(req and fn != "NoneType" for req, fn in test_flags), test_flags
    # after the loop `out` is the last training output; the test-time graphs lived on until the
    # next iteration rebound `out`, exactly like in the report
    print("evidence holds: each periodic test pass produced an output with requires_grad=True and "
          "grad_fn=%s, a live graph that is never backpropagated" % test_flags[0][1])
