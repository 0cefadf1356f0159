# source: https://jvns.ca/blog/2020/11/26/day-13--bptt---staring-at-graphs-a-lot/
# category: DL206
# expect: flag 55
# evidence: hidden.detach() leaves hidden attached to the segment already backpropagated, so the next optimizer step raises "Trying to backward through the graph a second time"
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

text = "to be or not to be that is the question whether tis nobler in the mind to suffer " * 4
chars = sorted(set(text))
char_to_idx = {c: i for i, c in enumerate(chars)}


class CharRNN(nn.Module):
    def __init__(self, vocab_size, hidden_size=32):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.rnn = nn.GRU(hidden_size, hidden_size)
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def forward(self, input, hidden):
        embedded = self.embedding(input).view(1, 1, -1)
        output, hidden = self.rnn(embedded, hidden)
        return self.decoder(output.view(1, -1)), hidden

    def init_hidden(self):
        return torch.zeros(1, 1, self.hidden_size)


class Trainer:
    def __init__(self, model, lr=0.005):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def training_data(self):
        for a, b in zip(text[:-1], text[1:]):
            yield torch.tensor([char_to_idx[a]]), torch.tensor([char_to_idx[b]])

    def train_bptt(self):
        model, optimizer = self.model, self.optimizer
        hidden = model.init_hidden()
        losses = []
        for i, (input, target) in enumerate(self.training_data()):
            output, hidden = model(input, hidden)
            # only do the optimizer step 10% of of the time
            if random.randint(0, 10) == 2:
                loss = F.cross_entropy(output, target)
                optimizer.zero_grad()
                loss.backward()  # calculate the derivative
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1)
                optimizer.step()  # adjust weights
                hidden.detach()
                losses.append(loss.item())
        return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    trainer = Trainer(CharRNN(len(chars)))
    try:
        trainer.train_bptt()
        raise AssertionError("expected the second BPTT update to fail")
    except RuntimeError as err:
        assert "Trying to backward through the graph a second time" in str(err), err
    print("evidence holds: the second BPTT update raises 'Trying to backward through the graph a second time'")
