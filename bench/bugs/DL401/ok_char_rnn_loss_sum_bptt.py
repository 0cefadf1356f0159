# source: https://github.com/spro/practical-pytorch/pull/29
# category: DL401
# expect: clean
# evidence: the per-character loss is summed on purpose and backpropagated once per chunk (BPTT); train() returns a float, the epoch-level loss_avg stays a Python float, and every decoder parameter gets a gradient and changes.
import random
import string
import time
import torch
import torch.nn as nn
from torch.autograd import Variable

all_characters = string.printable
n_characters = len(all_characters)


def char_tensor(s):
    tensor = torch.zeros(len(s)).long()
    for c in range(len(s)):
        tensor[c] = all_characters.index(s[c])
    return Variable(tensor)


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, n_layers=1):
        super(RNN, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.n_layers = n_layers

        self.encoder = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        input = self.encoder(input.view(1, -1))
        output, hidden = self.gru(input.view(1, 1, -1), hidden)
        output = self.decoder(output.view(1, -1))
        return output, hidden

    def init_hidden(self):
        return Variable(torch.zeros(self.n_layers, 1, self.hidden_size))


class Args:
    n_epochs = 6
    print_every = 3
    hidden_size = 16
    n_layers = 2
    learning_rate = 0.01
    chunk_len = 20


args = Args()
file = "the quick brown fox jumps over the lazy dog. " * 8
file_len = len(file)


def random_training_set(chunk_len):
    start_index = random.randint(0, file_len - chunk_len - 1)
    end_index = start_index + chunk_len + 1
    chunk = file[start_index:end_index]
    inp = char_tensor(chunk[:-1])
    target = char_tensor(chunk[1:])
    return inp, target


decoder = RNN(n_characters, args.hidden_size, n_characters, args.n_layers)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=args.learning_rate)
criterion = nn.CrossEntropyLoss()

start = time.time()
all_losses = []
loss_avg = 0


def train(inp, target):
    hidden = decoder.init_hidden()
    decoder.zero_grad()
    loss = 0

    for c in range(args.chunk_len):
        output, hidden = decoder(inp[c], hidden)
        loss += criterion(output, target[c].view(1))

    loss.backward()
    decoder_optimizer.step()

    return loss.item() / args.chunk_len


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    before = [p.detach().clone() for p in decoder.parameters()]
    grads_seen = []
    for epoch in range(1, args.n_epochs + 1):
        loss = train(*random_training_set(args.chunk_len))
        grads_seen.append(all(p.grad is not None for p in decoder.parameters()))
        loss_avg += loss

        if epoch % args.print_every == 0:
            print('[%d %d%%] %.4f' % (epoch, epoch / args.n_epochs * 100, loss))

    assert isinstance(loss_avg, float), type(loss_avg)
    assert all(grads_seen)
    with torch.no_grad():
        assert all(not torch.equal(b, p) for b, p in zip(before, decoder.parameters()))
    print("evidence holds: summed chunk loss trains every parameter; loss_avg is a plain float with no graph")
