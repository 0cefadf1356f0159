"""Training and evaluation loops for the example project."""

import torch
from torch import nn

from models import Classifier


def train_one_epoch(model, loader, optimizer, device="cpu"):
    model.train()
    criterion = nn.BCELoss()
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        prob = torch.sigmoid(model(images)).amax(dim=1)
        # Keep the loss finite: but autograd never sees this clamp.
        prob.data.clamp_(1e-4, 1 - 1e-4)
        loss = criterion(prob, labels.float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def evaluate(model, loader, device="cpu"):
    model.eval()
    correct = total = 0
    for images, labels in loader:
        logits = model(images.to(device))
        correct += (logits.argmax(1) == labels.to(device)).sum().item()
        total += labels.numel()
    return correct / max(total, 1)


@torch.no_grad()
def predict(model, images):
    model.eval()
    return [model(batch).softmax(-1) for batch in images.split(32)]


def main():
    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, optimizer


if __name__ == "__main__":
    main()
