# source: https://github.com/liorshk/facenet_pytorch/issues/9
# category: DL202
# expect: flag 73, 74, 75
# evidence: the hard-triplet embeddings are re-wrapped from numpy, so triplet_loss has requires_grad=False and the parameter gradients of cross_entropy_loss + triplet_loss equal those of cross_entropy_loss alone.
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable


class PairwiseDistance(nn.Module):
    def __init__(self, p):
        super(PairwiseDistance, self).__init__()
        self.norm = p

    def forward(self, x1, x2):
        assert x1.size() == x2.size()
        eps = 1e-4 / x1.size(1)
        diff = torch.abs(x1 - x2)
        out = torch.pow(diff, self.norm).sum(dim=1)
        return torch.pow(out + eps, 1. / self.norm)


class TripletMarginLoss(nn.Module):
    def __init__(self, margin):
        super(TripletMarginLoss, self).__init__()
        self.margin = margin
        self.pdist = PairwiseDistance(2)

    def forward(self, anchor, positive, negative):
        d_p = self.pdist.forward(anchor, positive)
        d_n = self.pdist.forward(anchor, negative)
        dist_hinge = torch.clamp(self.margin + d_p - d_n, min=0.0)
        return torch.mean(dist_hinge)


class FaceModel(nn.Module):
    def __init__(self, embedding_size, num_classes, in_dim=20):
        super(FaceModel, self).__init__()
        self.model = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, embedding_size))
        self.classifier = nn.Linear(embedding_size, num_classes)

    def l2_norm(self, input):
        return input / input.norm(p=2, dim=1, keepdim=True)

    def forward(self, x):
        self.features = self.l2_norm(self.model(x))
        return self.features * 10

    def forward_classifier(self, x):
        return self.classifier(self.forward(x))


margin = 0.5
l2_dist = PairwiseDistance(2)


def train(train_loader, model, optimizer, epoch, record):
    model.train()
    for batch_idx, (data_a, data_p, data_n, label_p, label_n) in enumerate(train_loader):
        data_a, data_p, data_n = Variable(data_a), Variable(data_p), Variable(data_n)

        # compute output
        out_a, out_p, out_n = model(data_a), model(data_p), model(data_n)

        # Choose the hard negatives
        d_p = l2_dist.forward(out_a, out_p)
        d_n = l2_dist.forward(out_a, out_n)
        all = (d_n - d_p < margin).cpu().data.numpy().flatten()
        hard_triplets = np.where(all == 1)
        if len(hard_triplets[0]) == 0:
            continue
        out_selected_a = Variable(torch.from_numpy(out_a.cpu().data.numpy()[hard_triplets]))
        out_selected_p = Variable(torch.from_numpy(out_p.cpu().data.numpy()[hard_triplets]))
        out_selected_n = Variable(torch.from_numpy(out_n.cpu().data.numpy()[hard_triplets]))

        selected_data_a = Variable(torch.from_numpy(data_a.cpu().data.numpy()[hard_triplets]))
        selected_data_p = Variable(torch.from_numpy(data_p.cpu().data.numpy()[hard_triplets]))
        selected_data_n = Variable(torch.from_numpy(data_n.cpu().data.numpy()[hard_triplets]))

        selected_label_p = torch.from_numpy(label_p.cpu().numpy()[hard_triplets])
        selected_label_n = torch.from_numpy(label_n.cpu().numpy()[hard_triplets])
        triplet_loss = TripletMarginLoss(margin).forward(out_selected_a, out_selected_p, out_selected_n)

        cls_a = model.forward_classifier(selected_data_a)
        cls_p = model.forward_classifier(selected_data_p)
        cls_n = model.forward_classifier(selected_data_n)

        criterion = nn.CrossEntropyLoss()
        predicted_labels = torch.cat([cls_a, cls_p, cls_n])
        true_labels = torch.cat([Variable(selected_label_p), Variable(selected_label_p), Variable(selected_label_n)])

        cross_entropy_loss = criterion(predicted_labels, true_labels)

        loss = cross_entropy_loss + triplet_loss
        # (evidence only) gradient of the cross-entropy term alone, taken without touching .grad
        ce_grad = torch.autograd.grad(cross_entropy_loss, list(model.parameters()), retain_graph=True)
        # compute gradient and update weights
        optimizer.zero_grad()
        loss.backward()
        full_grad = [p.grad.detach().clone() for p in model.parameters()]
        record.append((triplet_loss.requires_grad, triplet_loss.item(), full_grad, ce_grad))
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = FaceModel(embedding_size=8, num_classes=5)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.1)
    train_loader = [(torch.randn(6, 20), torch.randn(6, 20), torch.randn(6, 20),
                     torch.randint(0, 5, (6,)), torch.randint(0, 5, (6,))) for _ in range(3)]
    record = []
    train(train_loader, model, optimizer, 0, record)
    assert record
    with torch.no_grad():
        for requires_grad, trip_value, full_grad, ce_grad in record:
            assert requires_grad is False
            assert trip_value > 0
            assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(full_grad, ce_grad))
    print("evidence holds: the triplet term is a constant for autograd; the update is driven by the cross-entropy term only")
