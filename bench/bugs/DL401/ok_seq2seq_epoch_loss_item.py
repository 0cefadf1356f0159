# source: https://github.com/bentrevett/pytorch-seq2seq/blob/master/1%20-%20Sequence%20to%20Sequence%20Learning%20with%20Neural%20Networks.ipynb
# category: DL401
# expect: clean
# evidence: train()/evaluate() accumulate epoch_loss += loss.item(), a Python float, so no step's graph outlives its iteration; the returned epoch losses are floats and the model trains.
import random

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, hid_dim, n_layers, dropout):
        super().__init__()
        self.hid_dim = hid_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(input_dim, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hid_dim, n_layers, dropout=dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        embedded = self.dropout(self.embedding(src))
        outputs, (hidden, cell) = self.rnn(embedded)
        return hidden, cell


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, hid_dim, n_layers, dropout):
        super().__init__()
        self.output_dim = output_dim
        self.hid_dim = hid_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(output_dim, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hid_dim, n_layers, dropout=dropout)
        self.fc_out = nn.Linear(hid_dim, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, cell):
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        output, (hidden, cell) = self.rnn(embedded, (hidden, cell))
        prediction = self.fc_out(output.squeeze(0))
        return prediction, hidden, cell


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.device = device

    def forward(self, src, trg, teacher_forcing_ratio=0.5):
        batch_size = trg.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size).to(self.device)
        hidden, cell = self.encoder(src)
        input = trg[0, :]
        for t in range(1, trg_len):
            output, hidden, cell = self.decoder(input, hidden, cell)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


class Batch:
    def __init__(self, src, trg):
        self.src = src
        self.trg = trg


def train(model, iterator, optimizer, criterion, clip):

    model.train()

    epoch_loss = 0

    for i, batch in enumerate(iterator):

        src = batch.src
        trg = batch.trg

        optimizer.zero_grad()

        output = model(src, trg)

        output_dim = output.shape[-1]

        output = output[1:].view(-1, output_dim)
        trg = trg[1:].view(-1)

        loss = criterion(output, trg)

        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)

        optimizer.step()

        epoch_loss += loss.item()

    return epoch_loss / len(iterator)


def evaluate(model, iterator, criterion):

    model.eval()

    epoch_loss = 0

    with torch.no_grad():

        for i, batch in enumerate(iterator):

            src = batch.src
            trg = batch.trg

            output = model(src, trg, 0)  # turn off teacher forcing

            output_dim = output.shape[-1]

            output = output[1:].view(-1, output_dim)
            trg = trg[1:].view(-1)

            loss = criterion(output, trg)

            epoch_loss += loss.item()

    return epoch_loss / len(iterator)


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    device = torch.device('cpu')
    INPUT_DIM, OUTPUT_DIM = 20, 22
    enc = Encoder(INPUT_DIM, 8, 16, 2, 0.1)
    dec = Decoder(OUTPUT_DIM, 8, 16, 2, 0.1)
    model = Seq2Seq(enc, dec, device).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    TRG_PAD_IDX = 0
    criterion = nn.CrossEntropyLoss(ignore_index=TRG_PAD_IDX)
    train_iterator = [Batch(torch.randint(1, INPUT_DIM, (7, 4)), torch.randint(1, OUTPUT_DIM, (6, 4))) for _ in range(3)]
    valid_iterator = [Batch(torch.randint(1, INPUT_DIM, (7, 4)), torch.randint(1, OUTPUT_DIM, (6, 4))) for _ in range(2)]
    before = model.decoder.fc_out.weight.detach().clone()

    for epoch in range(2):
        train_loss = train(model, train_iterator, optimizer, criterion, 1)
        valid_loss = evaluate(model, valid_iterator, criterion)

    assert isinstance(train_loss, float) and isinstance(valid_loss, float)
    assert not torch.equal(before, model.decoder.fc_out.weight.detach())
    print("evidence holds: epoch losses are plain floats ({:.3f}, {:.3f}) and the decoder weights changed".format(train_loss, valid_loss))
