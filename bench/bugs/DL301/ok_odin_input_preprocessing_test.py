# source: https://github.com/facebookresearch/odin/blob/main/code/calData.py
# category: DL301
# expect: clean
# evidence: ODIN's test loop needs the input gradient: backward fills inputs.grad for every image, and the re-scoring of the perturbed input runs under torch.no_grad()
import io

import torch
from torch import nn


class DenseNetStub(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(self.features(x))


def testDataOut(net1, criterion, testloader, noiseMagnitude1, temper, N, f2, g2):
    rescored = []
    for j, data in enumerate(testloader):
        inputs, _ = data
        inputs.requires_grad_()
        outputs = net1(inputs)

        # Calculating the confidence of the output, no perturbation added here
        score = outputs.detach().softmax(dim=1).max(dim=1)
        f2.write(f"{temper}, {noiseMagnitude1}, {score.values[0].item()}\n")

        # Calculating the perturbation we need to add, that is,
        # the sign of gradient of cross entropy loss w.r.t. input
        # Using temperature scaling
        scaled = outputs / temper
        labels = score.indices
        loss = criterion(scaled, labels)
        loss.backward()

        # Normalizing the gradient to binary in {-1, 1}
        gradient = torch.ge(inputs.grad, 0)
        gradient = (gradient.float() - 0.5) * 2
        # Normalizing the gradient to the same space of image
        gradient[0][0] /= 63.0 / 255.0
        gradient[0][1] /= 62.1 / 255.0
        gradient[0][2] /= 66.7 / 255.0
        # Adding small perturbations to images
        tempInputs = torch.add(inputs.detach(), gradient, alpha=-noiseMagnitude1)

        with torch.no_grad():
            outputs = net1(tempInputs) / temper
            score = outputs.softmax(dim=1).max(dim=1)

        # Calculating the confidence after adding perturbations
        g2.write(f"{temper}, {noiseMagnitude1}, {score.values[0].item()}\n")
        rescored.append((inputs.grad is not None and bool(inputs.grad.abs().sum() > 0), outputs.requires_grad))
        if j == N - 1:
            break
    return rescored


if __name__ == "__main__":
    torch.manual_seed(0)
    net1 = DenseNetStub()
    net1.eval()
    criterion = nn.CrossEntropyLoss()
    testloader = [(torch.randn(1, 3, 8, 8), torch.tensor([0])) for _ in range(6)]
    f2, g2 = io.StringIO(), io.StringIO()
    rescored = testDataOut(net1, criterion, testloader, noiseMagnitude1=0.0014, temper=1000, N=6, f2=f2, g2=g2)
    assert len(rescored) == 6
    assert all(has_grad for has_grad, _ in rescored)
    assert not any(requires_grad for _, requires_grad in rescored)
    assert len(g2.getvalue().splitlines()) == 6
    print("evidence holds: each image's backward filled inputs.grad; the perturbed re-scoring carries no graph")
