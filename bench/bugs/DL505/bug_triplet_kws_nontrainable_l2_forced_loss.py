# source: https://github.com/roman-vygon/triplet_loss_kws/issues/6
# category: DL505
# expect: flag 18, 71
# evidence: the L2 regularizer is a non-trainable module whose __call__ runs forward under no_grad; setting mean_losses.requires_grad = True lets training run, but the encoder's weights never change
import torch
import torch.nn as nn
import torch.nn.functional as F


class NeuralModule(nn.Module):
    pass


class NonTrainableNM(NeuralModule):
    """Modules without weights: the framework evaluates them without building a graph."""

    def __call__(self, *input, **kwargs):
        with torch.no_grad():
            return self.forward(*input, **kwargs)


class LossNM(NeuralModule):
    def forward(self, **kwargs):
        return self._loss_function(**kwargs)


class TripletEncoder(NeuralModule):
    def __init__(self, feat_in=8, emb=6):
        super().__init__()
        self.conv = nn.Conv1d(feat_in, emb, 3, padding=1)

    def forward(self, audio_signal):
        return torch.relu(self.conv(audio_signal))


class L2Regularizer(NonTrainableNM):
    """Makes the sum of squares of embeddings equal to 1."""

    def regularize(self, embeds):
        l2_embeds = F.normalize(embeds, p=2, dim=-1)
        return l2_embeds

    def forward(self, embeds):
        return self.regularize(embeds)


class AllTripletSelector:
    def get_triplets(self, embeddings, labels):
        triplets = []
        for a in range(len(labels)):
            for p in range(len(labels)):
                for n in range(len(labels)):
                    if a != p and labels[a] == labels[p] and labels[a] != labels[n]:
                        triplets.append((a, p, n))
        return torch.tensor(triplets)


class OnlineTripletLoss(LossNM):
    def __init__(self, margin, triplet_selector):
        super().__init__()
        self.margin = margin
        self.triplet_selector = triplet_selector

    def _loss(self, embeddings, target):
        embeddings = torch.flatten(embeddings, start_dim=-2)
        triplets = self.triplet_selector.get_triplets(embeddings, target)
        ap_distances = (embeddings[triplets[:, 0]] - embeddings[triplets[:, 1]]).pow(2).sum(1)
        an_distances = (embeddings[triplets[:, 0]] - embeddings[triplets[:, 2]]).pow(2).sum(1)
        losses = F.relu(ap_distances - an_distances + self.margin)
        mean_losses = losses.mean()
        mean_losses.requires_grad = True
        return mean_losses

    def _loss_function(self, **kwargs):
        return self._loss(*(kwargs.values()))


def train(encoder, l2_regularizer, triplet_loss, batches, lr=0.1):
    optimizer = torch.optim.SGD(encoder.parameters(), lr=lr)
    for audio_signal, labels in batches:
        embeds = encoder(audio_signal)
        l2_embeds = l2_regularizer(embeds)
        loss = triplet_loss(embeds=l2_embeds, targets=labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder = TripletEncoder()
    before = [p.detach().clone() for p in encoder.parameters()]
    batches = [(torch.randn(6, 8, 5), torch.tensor([0, 0, 1, 1, 2, 2])) for _ in range(3)]
    loss = train(encoder, L2Regularizer(), OnlineTripletLoss(1.0, AllTripletSelector()), batches)
    assert loss.item() > 0 and loss.grad_fn is None
    assert all(p.grad is None for p in encoder.parameters())
    assert all(torch.equal(b, p.detach()) for b, p in zip(before, encoder.parameters()))
    print("evidence holds: the forced loss has no graph back to the encoder; training runs and changes nothing")
