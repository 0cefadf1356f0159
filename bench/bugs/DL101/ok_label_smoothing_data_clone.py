# source: https://github.com/taoztw/Transformer/issues/2
# category: DL101
# expect: clean
# evidence: LabelSmoothing edits true_dist in place (fill_, scatter_, index_fill_) but true_dist is x.data.clone(), a fresh copy; the log-probabilities x keep their graph, the KL loss backpropagates and every model parameter gets a gradient and is updated by NoamOpt.
"""
model.py (LabelSmoothing, SimpleLossCompute, NoamOpt, Generator, EncoderDecoder) and train.py run_epoch
of the report's repository; the encoder/decoder stacks are torch.nn Transformer layers with tiny sizes.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class LabelSmoothing(nn.Module):
    "Implement label smoothing."

    def __init__(self, size, padding_idx, smoothing=0.0):
        super(LabelSmoothing, self).__init__()
        self.criterion = nn.KLDivLoss(reduction='sum')
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size
        self.true_dist = None

    def forward(self, x, target):
        assert x.size(1) == self.size
        true_dist = x.data.clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        mask = torch.nonzero(target.data == self.padding_idx)
        if mask.dim() > 0:
            true_dist.index_fill_(0, mask.squeeze(), 0.0)
        self.true_dist = true_dist
        return self.criterion(x, Variable(true_dist, requires_grad=False))


class SimpleLossCompute:
    "A simple loss compute and train function."

    def __init__(self, generator, criterion, opt=None):
        self.generator = generator
        self.criterion = criterion
        self.opt = opt

    def __call__(self, x, y, norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        loss.backward()
        if self.opt is not None:
            self.opt.step()
            self.opt.optimizer.zero_grad()
        return loss.data.item() * norm.float()


class NoamOpt:
    "Optim wrapper that implements rate."

    def __init__(self, model_size, factor, warmup, optimizer):
        self.optimizer = optimizer
        self._step = 0
        self.warmup = warmup
        self.factor = factor
        self.model_size = model_size
        self._rate = 0

    def step(self):
        self._step += 1
        rate = self.rate()
        for p in self.optimizer.param_groups:
            p['lr'] = rate
        self._rate = rate
        self.optimizer.step()

    def rate(self, step=None):
        if step is None:
            step = self._step
        return self.factor * (self.model_size ** (-0.5) * min(step ** (-0.5), step * self.warmup ** (-1.5)))


class Generator(nn.Module):
    def __init__(self, d_model, vocab):
        super(Generator, self).__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, src_embed, tgt_embed, generator):
        super(EncoderDecoder, self).__init__()
        self.encoder, self.decoder = encoder, decoder
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.generator = generator

    def forward(self, src, tgt, src_mask, tgt_mask):
        memory = self.encoder(self.src_embed(src), src_key_padding_mask=~src_mask)
        return self.decoder(self.tgt_embed(tgt), memory, tgt_mask=tgt_mask, memory_key_padding_mask=~src_mask)


def make_model(src_vocab, tgt_vocab, N=1, d_model=16, d_ff=32, h=2, dropout=0.0):
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, h, d_ff, dropout, batch_first=True), N)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d_model, h, d_ff, dropout, batch_first=True), N)
    return EncoderDecoder(encoder, decoder, nn.Embedding(src_vocab, d_model), nn.Embedding(tgt_vocab, d_model),
                          Generator(d_model, tgt_vocab))


class Batch:
    def __init__(self, src, trg=None, pad=0):
        self.src = src
        self.src_mask = (src != pad)
        self.trg = trg[:, :-1]
        self.trg_y = trg[:, 1:]
        self.trg_mask = nn.Transformer.generate_square_subsequent_mask(self.trg.size(1)).bool()
        self.ntokens = (self.trg_y != pad).data.sum()


def run_epoch(data, model, loss_compute, epoch):
    start = time.time()
    total_tokens = 0.
    total_loss = 0.
    for i, batch in enumerate(data):
        out = model(batch.src, batch.trg, batch.src_mask, batch.trg_mask)
        loss = loss_compute(out, batch.trg_y, batch.ntokens)
        total_loss += loss
        total_tokens += batch.ntokens
    return total_loss / total_tokens


if __name__ == "__main__":
    torch.manual_seed(0)
    SRC_VOCAB, TGT_VOCAB = 11, 13
    model = make_model(SRC_VOCAB, TGT_VOCAB)
    criterion = LabelSmoothing(TGT_VOCAB, padding_idx=0, smoothing=0.1)
    optimizer = NoamOpt(16, 1, 20, torch.optim.Adam(model.parameters(), lr=0, betas=(0.9, 0.98), eps=1e-9))
    data = []
    for _ in range(3):
        src = torch.randint(1, SRC_VOCAB, (4, 6))
        trg = torch.randint(1, TGT_VOCAB, (4, 7))
        trg[:2, -2:] = 0  # padding at the end of two sentences
        data.append(Batch(src, trg))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    # one batch by hand to look at the gradients, then the epoch as train.py runs it
    model.train()
    b = data[0]
    out = model.generator(model(b.src, b.trg, b.src_mask, b.trg_mask))
    loss = criterion(out.contiguous().view(-1, out.size(-1)), b.trg_y.contiguous().view(-1)) / b.ntokens
    assert out.grad_fn is not None and not criterion.true_dist.requires_grad
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum().item() > 0 for p in model.parameters())
    optimizer.optimizer.zero_grad()

    train_loss = run_epoch(data, model, SimpleLossCompute(model.generator, criterion, optimizer), 0)
    with torch.no_grad():
        assert all(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert torch.isfinite(torch.as_tensor(train_loss))
    print("evidence holds: the smoothed target is a detached copy; all parameters get gradients and train")
