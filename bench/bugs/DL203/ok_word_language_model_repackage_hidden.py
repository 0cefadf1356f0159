# source: https://github.com/pytorch/examples/blob/main/word_language_model/main.py
# category: DL203
# expect: clean
# evidence: the hidden state fed to each batch is detached, yet loss.backward() works and reaches every parameter
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.0):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers = nlayers
        self.nhid = nhid

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def train(model, train_data, criterion, lr, bptt=5, batch_size=3, clip=0.25):
    model.train()
    total_loss = 0.
    hidden = model.init_hidden(batch_size)
    hidden_inputs = []
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i, bptt)
        hidden = repackage_hidden(hidden)
        hidden_inputs.append(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
    return total_loss / (batch + 1), hidden_inputs


if __name__ == "__main__":
    torch.manual_seed(0)
    ntokens = 11
    model = RNNModel(ntokens, ninp=8, nhid=8, nlayers=1)
    train_data = torch.randint(0, ntokens, (16, 3))
    avg_loss, hidden_inputs = train(model, train_data, nn.NLLLoss(), lr=1.0)
    assert math.isfinite(avg_loss)
    assert all(h.grad_fn is None for pair in hidden_inputs[1:] for h in pair)  # each chunk starts detached
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    print("evidence holds: truncated BPTT detaches the carried state; backward still trains the model")
