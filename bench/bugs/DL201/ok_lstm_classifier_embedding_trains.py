# source: https://github.com/jiangqy/LSTM-Classification-pytorch/issues/2
# category: DL201
# expect: clean
# evidence: the word embeddings the issue suspected to be frozen do get gradients and change; the .data reads (torch.max(output.data, 1)) only feed the accuracy counters.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


class LSTMClassifier(nn.Module):
    def __init__(self, embedding_dim, hidden_dim, vocab_size, label_size, batch_size, use_gpu):
        super(LSTMClassifier, self).__init__()
        self.hidden_dim = hidden_dim
        self.batch_size = batch_size
        self.use_gpu = use_gpu
        self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim)
        self.hidden2label = nn.Linear(hidden_dim, label_size)
        self.hidden = self.init_hidden()

    def init_hidden(self):
        h0 = Variable(torch.zeros(1, self.batch_size, self.hidden_dim))
        c0 = Variable(torch.zeros(1, self.batch_size, self.hidden_dim))
        return (h0, c0)

    def forward(self, sentence):
        embeds = self.word_embeddings(sentence)
        x = embeds.view(len(sentence), self.batch_size, -1)
        lstm_out, self.hidden = self.lstm(x, self.hidden)
        y = self.hidden2label(lstm_out[-1])
        return y


def adjust_learning_rate(optimizer, epoch):
    lr = learning_rate * (0.1 ** (epoch // 10))
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr
    return optimizer


# ---- main.py (module level, as in the repository) ----
torch.manual_seed(0)
use_gpu = False
epochs = 3
batch_size = 5
embedding_dim = 12
hidden_dim = 10
sentence_len = 7
vocab_size = 30
nlabel = 4
learning_rate = 0.1

train_loader = [(torch.randint(1, vocab_size, (batch_size, sentence_len)), torch.randint(0, nlabel, (batch_size, 1)))
                for _ in range(4)]

model = LSTMClassifier(embedding_dim=embedding_dim, hidden_dim=hidden_dim, vocab_size=vocab_size,
                       label_size=nlabel, batch_size=batch_size, use_gpu=use_gpu)
optimizer = optim.SGD(model.parameters(), lr=learning_rate)
loss_function = nn.CrossEntropyLoss()
embedding_before = model.word_embeddings.weight.detach().clone()
embedding_grad_seen = []

train_loss_ = []
train_acc_ = []
for epoch in range(epochs):
    optimizer = adjust_learning_rate(optimizer, epoch)
    total_acc = 0.0
    total_loss = 0.0
    total = 0.0
    for iter, traindata in enumerate(train_loader):
        train_inputs, train_labels = traindata
        train_labels = torch.squeeze(train_labels)
        train_inputs = Variable(train_inputs)

        model.zero_grad()
        model.batch_size = len(train_labels)
        model.hidden = model.init_hidden()
        output = model(train_inputs.t())

        loss = loss_function(output, Variable(train_labels))
        loss.backward()
        embedding_grad_seen.append(model.word_embeddings.weight.grad is not None)
        optimizer.step()

        # calc training acc
        _, predicted = torch.max(output.data, 1)
        total_acc += (predicted == train_labels).sum().item()
        total += len(train_labels)
        total_loss += loss.item()

    train_loss_.append(total_loss / total)
    train_acc_.append(total_acc / total)
    print('[Epoch: %3d/%3d] Training Loss: %.3f, Training Acc: %.3f' % (epoch, epochs, train_loss_[epoch], train_acc_[epoch]))


if __name__ == "__main__":
    with torch.no_grad():
        assert all(embedding_grad_seen)
        assert not torch.equal(embedding_before, model.word_embeddings.weight)
    print("evidence holds: the embedding layer receives gradients and its weights change during training")
