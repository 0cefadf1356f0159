# source: https://github.com/Stonesjtu/Pytorch-NCE/blob/master/nce/nce_loss.py
# category: DL101
# expect: flag 114, 116
# evidence: exp() saves its output for backward and the output is clamped through .data, so the decoder gets gradients that differ from the ones of the same NCE loss written with torch.clamp
"""A generic NCE wrapper which speedup the training and inferencing"""

import math

import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)


class AliasMultinomial(object):
    """Draw samples from the (fixed) noise distribution"""

    def __init__(self, probs):
        self.probs = probs

    def draw(self, *size):
        num = 1
        for s in size:
            num *= s
        return torch.multinomial(self.probs, num, replacement=True).view(*size)


class NCELoss(nn.Module):
    """Noise Contrastive Estimation

    Attributes:
        noise: the distribution of noise
        noise_ratio: $\frac{#noises}{#real data samples}$ (k in paper)
        norm_term: the normalization term (lnZ in paper)
        size_average: average the loss by batch size
        loss_type: 'nce' or 'full'
    """

    def __init__(self,
                 noise,
                 noise_ratio=10,
                 norm_term=9,
                 size_average=True,
                 per_word=False,
                 loss_type='nce',
                 ):
        super(NCELoss, self).__init__()

        self.register_buffer('noise', noise)
        self.alias = AliasMultinomial(noise)
        self.noise_ratio = noise_ratio
        if norm_term == 'auto':
            self.norm_term = math.log(noise.numel())
        else:
            self.norm_term = norm_term
        self.size_average = size_average
        self.per_word = per_word
        self.bce = nn.BCELoss(reduction='none')
        self.ce = nn.CrossEntropyLoss(reduction='none')
        self.loss_type = loss_type

    def forward(self, target, *args, **kwargs):
        """compute the loss with output and the desired target"""

        batch = target.size(0)
        max_len = target.size(1)
        if self.loss_type != 'full':

            noise_samples = self.get_noise(batch, max_len)

            # B,N,Nr
            prob_noise = Variable(
                self.noise[noise_samples.data.view(-1)].view_as(noise_samples)
            )
            prob_target_in_noise = Variable(
                self.noise[target.data.view(-1)].view_as(target)
            )

            # (B,N), (B,N,Nr)
            prob_model, prob_noise_in_model = self._get_prob(target, noise_samples, *args, **kwargs)

            loss = self.nce_loss(
                prob_model, prob_noise_in_model,
                prob_noise, prob_target_in_noise,
            )
        else:
            loss = self.ce_loss(target, *args, **kwargs)

        if self.size_average:
            return loss.mean()
        else:
            return loss.sum()

    def get_noise(self, batch_size, max_len):
        """Generate noise samples from noise distribution"""

        noise_size = (batch_size, max_len, self.noise_ratio)
        if self.per_word:
            noise_samples = self.alias.draw(*noise_size)
        else:
            noise_samples = self.alias.draw(1, 1, self.noise_ratio).expand(*noise_size)

        noise_samples = Variable(noise_samples).contiguous()
        return noise_samples

    def _get_prob(self, target_idx, noise_idx, *args, **kwargs):
        """Get the NCE estimated probability for target and noise"""

        MIN_PROB = 1e-9  # a minimal probability for numerical stability
        target_score, noise_score = self.get_score(target_idx, noise_idx, *args, **kwargs)

        target_prob = target_score.sub(self.norm_term).exp()
        target_prob.data.clamp_(MIN_PROB, 1)
        noise_prob = noise_score.sub(self.norm_term).exp()
        noise_prob.data.clamp_(MIN_PROB, 1)
        return target_prob, noise_prob

    def get_score(self, target_idx, noise_idx, *args, **kwargs):
        raise NotImplementedError()

    def ce_loss(self, target_idx, *args, **kwargs):
        raise NotImplementedError()

    def nce_loss(self, prob_model, prob_noise_in_model, prob_noise, prob_target_in_noise):
        """Compute the classification loss given all four probabilities"""

        p_model = torch.cat([prob_model.unsqueeze(2), prob_noise_in_model], dim=2)
        p_noise = torch.cat([prob_target_in_noise.unsqueeze(2), prob_noise], dim=2)

        # predicted probability of the word comes from true data distribution
        p_true = p_model / (p_model + self.noise_ratio * p_noise)
        label = torch.zeros_like(p_model)
        label[:, :, 0] = 1

        loss = self.bce(p_true, label).sum(dim=2)
        return loss


class IndexLinear(NCELoss):
    """A linear layer that only decodes the results of provided indices"""

    def __init__(self, embedding_dim, num_classes, *args, **kwargs):
        super(IndexLinear, self).__init__(*args, **kwargs)
        self.weight = nn.Parameter(torch.Tensor(num_classes, embedding_dim))
        self.bias = nn.Parameter(torch.Tensor(num_classes))
        self.reset_parameters()

    def reset_parameters(self):
        init_range = 0.1
        nn.init.uniform_(self.weight, -init_range, init_range)
        nn.init.constant_(self.bias, 0.0)

    def get_score(self, target_idx, noise_idx, input):
        original_size = target_idx.size()
        input = input.contiguous().view(-1, 1, input.size(-1))
        target_idx = target_idx.view(-1)
        noise_idx = noise_idx.view(-1, noise_idx.size(-1))

        indices = torch.cat([target_idx.unsqueeze(-1), noise_idx], dim=-1)
        target_batch = self.weight.index_select(0, indices.view(-1)).view(indices.size(0), indices.size(1), -1)
        bias = self.bias.index_select(0, indices.view(-1)).view_as(indices).unsqueeze(1)
        out = torch.baddbmm(bias, input, target_batch.transpose(1, 2)).squeeze(1)
        target_score, noise_score = out[:, 0], out[:, 1:]
        target_score = target_score.view(*original_size)
        noise_score = noise_score.view(*original_size, -1)
        return target_score, noise_score


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a criterion (decoder and loss function)."""

    def __init__(self, ntoken, ninp, nhid, criterion):
        super(RNNModel, self).__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.GRU(ninp, nhid, batch_first=True)
        self.criterion = criterion

    def forward(self, input, target):
        emb = self.encoder(input)
        output, _ = self.rnn(emb)
        return self.criterion(target, output)


class ClampedIndexLinear(IndexLinear):
    """Reference for the check: the same probabilities clamped with an op autograd records."""

    def _get_prob(self, target_idx, noise_idx, *args, **kwargs):
        MIN_PROB = 1e-9
        target_score, noise_score = self.get_score(target_idx, noise_idx, *args, **kwargs)
        target_prob = torch.clamp(target_score.sub(self.norm_term).exp(), MIN_PROB, 1)
        noise_prob = torch.clamp(noise_score.sub(self.norm_term).exp(), MIN_PROB, 1)
        return target_prob, noise_prob


if __name__ == "__main__":
    ntokens, nhid = 50, 16
    noise = torch.rand(ntokens) + 0.1
    noise = noise / noise.sum()
    # norm_term is a hyper-parameter (lnZ); with a small one many exp(score) exceed 1 and get clamped
    criterion = IndexLinear(nhid, ntokens, noise=noise, noise_ratio=5, norm_term=0.0)
    model = RNNModel(ntokens, nhid, nhid, criterion)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    ref_criterion = ClampedIndexLinear(nhid, ntokens, noise=noise, noise_ratio=5, norm_term=0.0)
    ref_criterion.load_state_dict(criterion.state_dict())
    ref_model = RNNModel(ntokens, nhid, nhid, ref_criterion)
    ref_model.load_state_dict(model.state_dict())

    data = torch.randint(0, ntokens, (4, 8))
    target = torch.randint(0, ntokens, (4, 8))

    model.train()
    torch.manual_seed(1)
    optimizer.zero_grad()
    loss = model(data, target)
    loss.backward()

    torch.manual_seed(1)
    ref_loss = ref_model(data, target)
    ref_loss.backward()

    with torch.no_grad():
        probs = criterion.get_score(target, criterion.alias.draw(1, 1, 5).expand(4, 8, 5), model.rnn(model.encoder(data))[0])[0].exp()
    g_bug = model.criterion.weight.grad
    g_ref = ref_model.criterion.weight.grad
    diff = (g_bug - g_ref).abs().max().item()
    assert abs(loss.item() - ref_loss.item()) < 1e-5, (loss.item(), ref_loss.item())
    assert (probs > 1).any()
    assert diff > 1e-4, diff
    optimizer.step()
    print("evidence holds: identical NCE loss (%.4f) but the decoder weight gradient differs from the "
          "torch.clamp version by up to %.4f" % (loss.item(), diff))
