# source: https://github.com/henryhungle/MTN/issues/7
# category: DL301
# expect: flag 70, 72, 96
# evidence: after model.eval() the script reuses run_epoch(..., eval=True) for validation with grad enabled; the loss computer skips backward when it has no optimizer, so every validation batch builds a graph nobody uses: the decoder outputs carry grad_fns and autograd saves activations
import logging

import torch
import torch.nn as nn


class Batch(object):
    def __init__(self, src, trg, cap, pad=0):
        self.src = src
        self.trg = trg[:, :-1]
        self.trg_y = trg[:, 1:]
        self.cap = cap
        self.ntokens = (self.trg_y != pad).data.sum()


def make_batch(data, index, vocab):
    src, trg, cap = data[index]
    return Batch(src, trg, cap, pad=vocab['<blank>'])


class MTN(nn.Module):
    """Multimodal transformer: encode the dialogue, decode the response, auto-encode the caption (tiny)."""

    def __init__(self, vocab_size=12, d_model=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.encoder = nn.GRU(d_model, d_model, batch_first=True)
        self.decoder = nn.GRU(d_model, d_model, batch_first=True)
        self.generator = nn.Linear(d_model, vocab_size)
        self.auto_encoder_generator = nn.Linear(d_model, vocab_size)

    def forward(self, b):
        _, h = self.encoder(self.embed(b.src))
        out, _ = self.decoder(self.embed(b.trg), h)
        ae_out, _ = self.decoder(self.embed(b.cap), h)
        return out, ae_out


class SimpleLossCompute:
    "A simple loss compute and train function."

    def __init__(self, generator, ae_generator, criterion, opt=None, l=1.0):
        self.generator = generator
        self.ae_generator = ae_generator
        self.criterion = criterion
        self.opt = opt
        self.l = l

    def __call__(self, x, y, norm, ae_x, ae_y, ae_norm):
        x = self.generator(x)
        loss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm.float()
        ae_x = self.ae_generator(ae_x)
        ae_loss = self.criterion(ae_x.contiguous().view(-1, ae_x.size(-1)), ae_y.contiguous().view(-1)) / ae_norm.float()
        loss = loss + self.l * ae_loss
        if self.opt is not None:
            loss.backward()
            self.opt.step()
            self.opt.zero_grad()
        return loss.item() * norm.float()


def run_epoch(data, indices, vocab, epoch, model, loss_compute, eval=False):
    "Standard Training and Logging Function"
    total_tokens = 0
    total_loss = 0
    for j in range(len(indices)):
        b = make_batch(data, indices[j], vocab)
        out, ae_out = model.forward(b)
        ntokens_cap = (b.cap != vocab['<blank>']).data.sum()
        loss = loss_compute(out, b.trg_y, b.ntokens, ae_out, b.cap, ntokens_cap)
        total_loss += loss
        total_tokens += b.ntokens
    return total_loss / total_tokens.float()


def main(train_data, valid_data, vocab, num_epochs=1):
    model = MTN(len(vocab))
    criterion = nn.CrossEntropyLoss(ignore_index=vocab['<blank>'], reduction='sum')
    model_opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    train_indices = list(range(len(train_data)))
    valid_indices = list(range(len(valid_data)))
    min_valid_loss = 1.0e+10
    for epoch in range(num_epochs):
        model.train()
        train_loss = run_epoch(train_data, train_indices, vocab, epoch, model,
                               SimpleLossCompute(model.generator, model.auto_encoder_generator, criterion,
                                                 opt=model_opt))
        logging.info("epoch: %d  train loss: %f" % (epoch + 1, train_loss))
        # test on validation data
        logging.info('-------validation--------')
        model.eval()
        valid_loss = run_epoch(valid_data, valid_indices, vocab, epoch, model,
                               SimpleLossCompute(model.generator, model.auto_encoder_generator, criterion, opt=None),
                               eval=True)
        logging.info('epoch: %d validation loss: %f' % (epoch + 1, valid_loss))
        if min_valid_loss > valid_loss:
            min_valid_loss = valid_loss
    return model


def make_data(n):
    return [(torch.randint(1, 12, (2, 6)), torch.randint(1, 12, (2, 5)), torch.randint(1, 12, (2, 4))) for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab = {'<blank>': 0}
    vocab.update({'w%d' % i: i for i in range(1, 12)})
    decoded = []

    def record(module, inputs, output):
        if isinstance(module, nn.GRU) and not module.training:
            decoded.append(output[0])

    torch.nn.modules.module.register_module_forward_hook(record)
    model = main(make_data(2), make_data(3), vocab)
    assert not model.training and len(decoded) == 9 and all(o.grad_fn is not None for o in decoded)
    grads = torch.autograd.grad(decoded[-1].sum(), model.decoder.weight_hh_l0)
    assert grads[0].abs().sum() > 0
    print("evidence holds: all %d GRU outputs of validation (model in eval mode) carry grad_fns into the decoder"
          % len(decoded))
