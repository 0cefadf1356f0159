"""Models for the example project: a classifier whose encoder never learns."""

from torch import nn
import torch.nn.functional as F


class ConvEncoder(nn.Module):
    def __init__(self, channels: int = 3, width: int = 32):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width * 2, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.conv2(x))
        return self.pool(x).flatten(1)


class Classifier(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.encoder = ConvEncoder()
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(64, num_classes)

    def forward(self, images):
        features = self.encoder(images)
        # Meant to save memory; in fact the encoder is never trained.
        features = features.detach()
        return self.head(self.dropout(features))
