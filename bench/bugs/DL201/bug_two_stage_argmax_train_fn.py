# source: https://github.com/pytorch/pytorch/issues/1339
# category: DL201
# expect: flag 43
# evidence: the first module's parameters are in the optimizer, but only torch.max(y_p, 1)[1] (indices) reaches the second module, so their .grad stays None and they never change.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class FirstModel(nn.Module):
    """Predicts a coarse label for every sample."""

    def __init__(self, in_dim=10, n_coarse=5):
        super(FirstModel, self).__init__()
        self.fc1 = nn.Linear(in_dim, 16)
        self.fc2 = nn.Linear(16, n_coarse)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SecondModel(nn.Module):
    """Consumes the coarse label chosen by the first model."""

    def __init__(self, n_coarse=5, n_classes=3):
        super(SecondModel, self).__init__()
        self.embed = nn.Embedding(n_coarse, 8)
        self.out = nn.Linear(8, n_classes)

    def forward(self, coarse_label):
        return self.out(torch.tanh(self.embed(coarse_label)))


def train(first_model, second_model, optimizer, loader, num_epochs=3):
    first_model.train()
    second_model.train()
    history = []
    for epoch in range(num_epochs):
        for x, y in loader:
            x, y = Variable(x), Variable(y)
            y_p = first_model(x)
            y_p = torch.max(y_p, 1)[1]
            scores = second_model(y_p)
            loss = F.cross_entropy(scores, y)

            first_model.zero_grad()
            second_model.zero_grad()
            loss.backward()  # retain_variables=True
            history.append([p.grad for p in first_model.parameters()])
            optimizer.step()
        print('epoch %d loss %.4f' % (epoch, loss.item()))
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    first_model = FirstModel()
    second_model = SecondModel()
    optimizer = torch.optim.SGD(list(first_model.parameters()) + list(second_model.parameters()), lr=0.1)
    loader = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(4)]

    first_before = [p.detach().clone() for p in first_model.parameters()]
    second_before = [p.detach().clone() for p in second_model.parameters()]
    history = train(first_model, second_model, optimizer, loader)

    with torch.no_grad():
        assert all(g is None for grads in history for g in grads)
        assert all(torch.equal(a, p) for a, p in zip(first_before, first_model.parameters()))
        assert any(not torch.equal(a, p) for a, p in zip(second_before, second_model.parameters()))
    print("evidence holds: first_model gets no gradient through the argmax indices and never changes; second_model trains")
