# source: https://github.com/OpenNMT/OpenNMT-py/issues/403
# category: DL205
# expect: flag 15, 83
# evidence: after the first truncated-BPTT chunk, dec_state.detach() raises "Can't detach views in-place" on input_feed, an unsqueeze view
import torch
import torch.nn as nn


class DecoderState(object):
    """Interface for grouping together the current state of a recurrent decoder."""

    def detach(self):
        for h in self._all:
            if h is not None:
                h.detach_()


class RNNDecoderState(DecoderState):
    def __init__(self, hidden_size, rnnstate):
        if not isinstance(rnnstate, tuple):
            self.hidden = (rnnstate,)
        else:
            self.hidden = rnnstate
        batch_size = self.hidden[0].size(1)
        self.input_feed = self.hidden[0].new_zeros(batch_size, hidden_size).unsqueeze(0)

    @property
    def _all(self):
        return self.hidden + (self.input_feed,)

    def update_state(self, rnnstate, input_feed):
        self.hidden = rnnstate if isinstance(rnnstate, tuple) else (rnnstate,)
        self.input_feed = input_feed


class InputFeedRNNDecoder(nn.Module):
    def __init__(self, vocab, hidden_size):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden_size)
        self.rnn = nn.LSTMCell(2 * hidden_size, hidden_size)
        self.hidden_size = hidden_size

    def forward(self, tgt, state):
        output = state.input_feed.squeeze(0)
        hidden = (state.hidden[0][0], state.hidden[1][0])
        outputs = []
        for emb_t in self.embeddings(tgt).split(1):
            h, c = self.rnn(torch.cat([emb_t.squeeze(0), output], 1), hidden)
            hidden, output = (h, c), h
            outputs.append(output)
        outputs = torch.stack(outputs)
        state.update_state((hidden[0].unsqueeze(0), hidden[1].unsqueeze(0)), outputs[-1].unsqueeze(0))
        return outputs, state


class NMTModel(nn.Module):
    def __init__(self, vocab=12, hidden_size=8):
        super().__init__()
        self.encoder = nn.LSTM(hidden_size, hidden_size)
        self.src_emb = nn.Embedding(vocab, hidden_size)
        self.decoder = InputFeedRNNDecoder(vocab, hidden_size)
        self.generator = nn.Linear(hidden_size, vocab)

    def forward(self, src, tgt, dec_state=None):
        _, enc_final = self.encoder(self.src_emb(src))
        if dec_state is None:
            dec_state = RNNDecoderState(self.decoder.hidden_size, enc_final)
        out, dec_state = self.decoder(tgt, dec_state)
        return self.generator(out), dec_state


def train_batch(model, optim, criterion, src, tgt, trunc_size=3):
    target_size = tgt.size(0)
    dec_state = None
    for j in range(0, target_size - 1, trunc_size):
        tgt_chunk = tgt[j: j + trunc_size]
        model.zero_grad()
        outputs, dec_state = model(src, tgt_chunk[:-1], dec_state)
        loss = criterion(outputs.view(-1, outputs.size(-1)), tgt_chunk[1:].reshape(-1))
        loss.backward()
        optim.step()
        if dec_state is not None:
            dec_state.detach()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = NMTModel()
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    src = torch.randint(0, 12, (5, 2))
    tgt = torch.randint(0, 12, (7, 2))
    try:
        train_batch(model, optim, nn.CrossEntropyLoss(), src, tgt)
    except RuntimeError as err:
        assert "Can't detach views in-place" in str(err)
    else:
        raise AssertionError("detach_ on the input_feed view should raise")
    print("evidence holds: DecoderState.detach() calls h.detach_() on input_feed, a view, and it raises")
