# source: https://github.com/mapbox/robosat/pull/109
# category: DL301
# expect: flag 52, 60
# evidence: validate(loader, num_classes, device, net, criterion) calls net.eval() but runs net(images) with grad mode on, so every batch's outputs and loss carry a grad_fn although nothing is backpropagated.
import torch
import torch.nn as nn
import numpy as np


class MeanIoU:
    def __init__(self, labels):
        self.labels = labels
        self.confusion = np.zeros((len(labels), len(labels)), dtype=np.int64)

    def add(self, actual, predicted):
        for a, p in zip(actual, predicted):
            self.confusion[a, p] += 1

    def get(self):
        inter = np.diag(self.confusion)
        union = self.confusion.sum(0) + self.confusion.sum(1) - inter
        return float(np.nanmean(inter / np.maximum(union, 1)))


class CrossEntropyLoss2d(nn.Module):
    def __init__(self, weight=None):
        super().__init__()
        self.nll_loss = nn.NLLLoss(weight)

    def forward(self, inputs, targets):
        return self.nll_loss(nn.functional.log_softmax(inputs, dim=1), targets)


class UNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.enc = nn.Conv2d(3, 8, 3, padding=1)
        self.final = nn.Conv2d(8, num_classes, 1)

    def forward(self, x):
        return self.final(torch.relu(self.enc(x)))


def validate(loader, num_classes, device, net, criterion):
    num_samples = 0
    running_loss = 0

    iou = MeanIoU(range(num_classes))

    net.eval()

    for images, masks, tiles in loader:
        images = images.to(device)
        masks = masks.to(device)

        assert images.size()[2:] == masks.size()[1:], "resolutions for images and masks are in sync"

        num_samples += int(images.size(0))

        outputs = net(images)

        assert outputs.size()[2:] == masks.size()[1:], "resolutions for predictions and masks are in sync"
        assert outputs.size()[1] == num_classes, "classes for predictions and dataset are in sync"

        loss = criterion(outputs, masks)

        running_loss += loss.item()

        for mask, output in zip(masks, outputs):
            mask = mask.data.cpu().numpy()
            prediction = output.data.max(0)[1].cpu().numpy()
            iou.add(mask.ravel(), prediction.ravel())

    assert num_samples > 0, "dataset contains validation images and labels"

    return {"loss": running_loss / num_samples, "iou": iou.get()}


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cpu")
    num_classes = 2
    net = UNet(num_classes).to(device)
    criterion = CrossEntropyLoss2d(weight=torch.Tensor([1.0, 2.0])).to(device)
    val_loader = [(torch.randn(2, 3, 8, 8), torch.randint(0, 2, (2, 8, 8)), None) for _ in range(3)]

    graphs = []
    net.register_forward_hook(lambda m, inp, out: graphs.append(out.grad_fn))
    val_hist = validate(val_loader, num_classes, device, net, criterion)

    assert len(graphs) == 3 and all(g is not None for g in graphs), "each validation batch built a graph"
    assert all(p.grad is None for p in net.parameters()), "no backward in validate"
    print("evidence holds: validate() recorded", len(graphs), "graphs under net.eval(); loss", round(val_hist["loss"], 4))
