# source: https://github.com/pytorch/pytorch/issues/140469
# category: DL501
# expect: flag 48, 52
# evidence: image_syn is the product of the requires_grad leaf and 0.01, so it is no leaf and torch.optim.SGD refuses it with "can't optimize a non-leaf Tensor"
import argparse

import torch
from torch import nn
import torch.nn.functional as F


class ConvNet(nn.Module):
    """Small embedding network used by distribution matching."""

    def __init__(self, channel=3, width=16, num_classes=4, im_size=(8, 8)):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channel, width, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
        )
        feat = width * (im_size[0] // 4) * (im_size[1] // 4)
        self.classifier = nn.Linear(feat, num_classes)

    def embed(self, x):
        return self.features(x).flatten(1)

    def forward(self, x):
        return self.classifier(self.embed(x))


def make_real_dataset(num_classes, per_class, channel, im_size):
    images_all = torch.randn(num_classes * per_class, channel, *im_size)
    labels_all = torch.arange(num_classes).repeat_interleave(per_class)
    indices_class = [torch.nonzero(labels_all == c).flatten().tolist() for c in range(num_classes)]
    return images_all, labels_all, indices_class


def get_images(images_all, indices_class, c, n):
    idx_shuffle = torch.randperm(len(indices_class[c]))[:n]
    return images_all[[indices_class[c][i] for i in idx_shuffle]]


def distill(args):
    channel, im_size, num_classes = 3, (8, 8), 4
    images_all, labels_all, indices_class = make_real_dataset(num_classes, 10, channel, im_size)

    # synthetic set, initialised as small noise
    image_syn = torch.randn(size=(num_classes * args.ipc, channel, im_size[0], im_size[1]),
                            dtype=torch.float, requires_grad=True, device=args.device) * 0.01
    label_syn = torch.arange(num_classes).repeat_interleave(args.ipc)

    optimizer_img = torch.optim.SGD([image_syn, ], lr=args.lr_img, momentum=0.5)
    optimizer_img.zero_grad()

    for it in range(args.iterations):
        net = ConvNet(channel, 16, num_classes, im_size).to(args.device)
        for param in net.parameters():
            param.requires_grad = False
        loss = torch.tensor(0.0)
        for c in range(num_classes):
            img_real = get_images(images_all, indices_class, c, args.batch_real)
            img_syn = image_syn[c * args.ipc:(c + 1) * args.ipc]
            output_real = net.embed(img_real).detach()
            output_syn = net.embed(img_syn)
            loss = loss + F.mse_loss(output_real.mean(0), output_syn.mean(0), reduction="sum")
        optimizer_img.zero_grad()
        loss.backward()
        optimizer_img.step()
    return image_syn, label_syn


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--ipc", type=int, default=2)
    parser.add_argument("--lr_img", type=float, default=1.0)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--batch_real", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    return parser.parse_args(argv)


if __name__ == "__main__":
    torch.manual_seed(0)
    args = parse_args([])
    try:
        distill(args)
        raised = None
    except ValueError as e:
        raised = str(e)
    assert raised == "can't optimize a non-leaf Tensor", raised
    print("evidence holds: distill() dies at the optimizer: image_syn = randn(requires_grad=True) * 0.01 is not a leaf")
