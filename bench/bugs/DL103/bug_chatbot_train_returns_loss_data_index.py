# source: https://github.com/alexis-jacq/Pytorch-ChatBot/issues/1
# category: DL103
# expect: flag 79
# evidence: train() runs the whole seq2seq step and then raises "IndexError: invalid index of a 0-dim tensor" at return loss.data[0] / max_length
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

SOS_token = 0
EOS_token = 1
teacher_forcing_ratio = 0.5


class hp:
    max_length = 5
    hidden_size = 8


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(EncoderRNN, self).__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    def forward(self, input, hidden):
        embedded = self.embedding(input).view(1, 1, -1)
        output, hidden = self.gru(embedded, hidden)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, 1, self.hidden_size)


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super(DecoderRNN, self).__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        output = F.relu(self.embedding(input).view(1, 1, -1))
        output, hidden = self.gru(output, hidden)
        return F.log_softmax(self.out(output[0]), dim=1), hidden


def train(input_variable, target_variable, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion):
    encoder_hidden = encoder.initHidden()
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    input_length = input_variable.size()[0]
    target_length = target_variable.size()[0]
    loss = 0

    for ei in range(input_length):
        encoder_output, encoder_hidden = encoder(input_variable[ei], encoder_hidden)

    decoder_input = torch.LongTensor([[SOS_token]])
    decoder_hidden = encoder_hidden
    use_teacher_forcing = random.random() < teacher_forcing_ratio
    for di in range(target_length):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden)
        loss += criterion(decoder_output, target_variable[di])
        if use_teacher_forcing:
            decoder_input = target_variable[di]
        else:
            topv, topi = decoder_output.topk(1)
            decoder_input = topi.squeeze().detach()
            if decoder_input.item() == EOS_token:
                break

    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.data[0] / float(hp.max_length)


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    encoder = EncoderRNN(10, hp.hidden_size)
    decoder = DecoderRNN(hp.hidden_size, 10)
    encoder_optimizer = optim.SGD(encoder.parameters(), lr=0.01)
    decoder_optimizer = optim.SGD(decoder.parameters(), lr=0.01)
    pair = (torch.LongTensor([[3], [4], [5], [EOS_token]]), torch.LongTensor([[6], [7], [EOS_token]]))
    before = [p.detach().clone() for p in decoder.parameters()]
    try:
        train(pair[0], pair[1], encoder, decoder, encoder_optimizer, decoder_optimizer, nn.NLLLoss())
    except IndexError as err:
        assert "invalid index of a 0-dim tensor" in str(err), str(err)
    else:
        raise AssertionError("loss.data[0] should fail on a 0-dim loss")
    assert any(not torch.equal(b, p) for b, p in zip(before, decoder.parameters())), "the step itself ran"
    print("evidence holds: the seq2seq step ran, then return loss.data[0] / max_length raised IndexError")
