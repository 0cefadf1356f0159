# source: https://github.com/OpenNMT/OpenNMT-py/issues/1141
# category: DL301
# expect: flag 78, 83
# evidence: Trainer.validate() puts the model in eval mode and runs every validation batch with grad enabled: the decoder outputs carry grad_fns and autograd saves activations during validation
import torch
import torch.nn as nn


class Statistics(object):
    def __init__(self, loss=0, n_words=0, n_correct=0):
        self.loss = loss
        self.n_words = n_words
        self.n_correct = n_correct

    def update(self, stat):
        self.loss += stat.loss
        self.n_words += stat.n_words
        self.n_correct += stat.n_correct

    def ppl(self):
        return float(torch.exp(torch.tensor(self.loss / max(self.n_words, 1))))


class NMTModel(nn.Module):
    def __init__(self, vocab=12, dim=16):
        super(NMTModel, self).__init__()
        self.src_emb = nn.Embedding(vocab, dim)
        self.tgt_emb = nn.Embedding(vocab, dim)
        self.encoder = nn.LSTM(dim, dim)
        self.decoder = nn.LSTM(dim, dim)

    def forward(self, src, tgt, lengths):
        memory_bank, enc_state = self.encoder(self.src_emb(src))
        dec_out, _ = self.decoder(self.tgt_emb(tgt[:-1]), enc_state)
        attns = {"std": torch.softmax(torch.einsum("tbd,sbd->tbs", dec_out, memory_bank), dim=-1)}
        return dec_out, attns, enc_state


class NMTLossCompute(nn.Module):
    def __init__(self, generator):
        super(NMTLossCompute, self).__init__()
        self.generator = generator
        self.criterion = nn.NLLLoss(reduction='sum')

    def monolithic_compute_loss(self, batch, output, attns):
        target = batch.tgt[1:]
        scores = self.generator(output.view(-1, output.size(2)))
        loss = self.criterion(scores, target.reshape(-1))
        pred = scores.max(1)[1]
        return Statistics(loss.item(), target.numel(), pred.eq(target.reshape(-1)).sum().item())


class Batch(object):
    def __init__(self, src, tgt):
        self.src = (src, torch.full((src.size(1),), src.size(0)))
        self.tgt = tgt


class Trainer(object):
    def __init__(self, model, train_loss, valid_loss, optim):
        self.model = model
        self.train_loss = train_loss
        self.valid_loss = valid_loss
        self.optim = optim
        self.model.train()

    def validate(self, valid_iter):
        """ Validate model.
            valid_iter: validate data iterator
        Returns:
            :obj:`Statistics`: validation loss statistics
        """
        # Set model in validating mode.
        self.model.eval()

        stats = Statistics()

        for batch in valid_iter:
            src, src_lengths = batch.src
            tgt = batch.tgt

            # F-prop through the model.
            outputs, attns, _ = self.model(src, tgt, src_lengths)

            # Compute loss.
            batch_stats = self.valid_loss.monolithic_compute_loss(batch, outputs, attns)

            # Update statistics.
            stats.update(batch_stats)

        # Set model back to training mode.
        self.model.train()
        return stats


if __name__ == "__main__":
    torch.manual_seed(0)
    model = NMTModel()
    generator = nn.Sequential(nn.Linear(16, 12), nn.LogSoftmax(dim=-1))
    valid_loss = NMTLossCompute(generator)
    trainer = Trainer(model, valid_loss, valid_loss, torch.optim.SGD(model.parameters(), lr=0.1))
    valid_iter = [Batch(torch.randint(0, 12, (5, 2)), torch.randint(0, 12, (6, 2))) for _ in range(3)]
    outputs = []
    model.decoder.register_forward_hook(lambda mod, inp, out: outputs.append(out[0]))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        stats = trainer.validate(valid_iter)
    assert len(outputs) == 3 and all(o.grad_fn is not None for o in outputs)
    assert sum(saved) > 0
    print("evidence holds: validate() built graphs for %d batches (decoder outputs carry grad_fns, %d bytes saved); ppl %.2f"
          % (len(outputs), sum(saved), stats.ppl()))
