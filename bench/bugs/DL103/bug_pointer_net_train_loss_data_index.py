# source: https://github.com/higgsfield/np-hard-deep-reinforcement-learning/issues/5
# category: DL103
# expect: flag 52
# evidence: the training loop raises "IndexError: invalid index of a 0-dim tensor" at train_loss.append(loss.data[0]) right after the first adam.step()
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class PointerNet(nn.Module):
    """Sorting with a pointer network: attention over the encoded inputs picks the next element."""

    def __init__(self, embedding_size=8, hidden_size=8):
        super(PointerNet, self).__init__()
        self.embedding = nn.Linear(1, embedding_size)
        self.encoder = nn.LSTM(embedding_size, hidden_size, batch_first=True)
        self.decoder = nn.LSTMCell(embedding_size, hidden_size)
        self.W1 = nn.Linear(hidden_size, hidden_size, bias=False)
        self.W2 = nn.Linear(hidden_size, hidden_size, bias=False)
        self.vt = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, input):
        batch_size, seq_len = input.size()
        embedded = self.embedding(input.unsqueeze(2))
        encoder_outputs, (hidden, cell) = self.encoder(embedded)
        hidden, cell = hidden[0], cell[0]
        decoder_input = torch.zeros(batch_size, embedded.size(2))
        scores = []
        for _ in range(seq_len):
            hidden, cell = self.decoder(decoder_input, (hidden, cell))
            blend = torch.tanh(self.W1(encoder_outputs) + self.W2(hidden).unsqueeze(1))
            score = self.vt(blend).squeeze(2)
            scores.append(F.log_softmax(score, -1))
            idx = score.argmax(1)
            decoder_input = embedded[torch.arange(batch_size), idx]
        return torch.stack(scores, 1)


def train(pointer, adam, train_loader, n_epochs=1):
    train_loss = []
    for epoch in range(n_epochs):
        for batch_id, (inputs, target) in enumerate(train_loader):
            pointer.train()
            probs = pointer(inputs)
            loss = F.nll_loss(probs.view(-1, probs.size(-1)), target.view(-1))

            adam.zero_grad()
            loss.backward()
            adam.step()

            train_loss.append(loss.data[0])

            if batch_id % 10 == 0:
                print('epoch %d batch %d loss %.4f' % (epoch, batch_id, train_loss[-1]))
    return train_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    pointer = PointerNet()
    adam = optim.Adam(pointer.parameters(), lr=1e-3)
    inputs = torch.rand(4, 5)
    target = inputs.argsort(1)
    try:
        train(pointer, adam, [(inputs, target)])
    except IndexError as err:
        assert "invalid index of a 0-dim tensor" in str(err), str(err)
    else:
        raise AssertionError("loss.data[0] should fail on a 0-dim loss")
    print("evidence holds: train_loss.append(loss.data[0]) raised IndexError after the first step")
