# source: https://github.com/ShulinCao/OpenNRE-PyTorch/issues/11
# category: DL103
# expect: flag 194
# evidence: train_one_step returns loss.data[0] on the 0-dim loss and the training loop dies with "IndexError: invalid index of a 0-dim tensor"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable

torch.manual_seed(0)
np.random.seed(0)


def to_var(x):
    return Variable(torch.from_numpy(x))


class Accuracy(object):
    def __init__(self):
        self.correct = 0
        self.total = 0

    def add(self, is_correct):
        self.total += 1
        if is_correct:
            self.correct += 1

    def get(self):
        if self.total == 0:
            return 0.0
        return float(self.correct) / self.total

    def clear(self):
        self.correct = 0
        self.total = 0


class Embedding(nn.Module):
    def __init__(self, config):
        super(Embedding, self).__init__()
        self.config = config
        self.word_embedding = nn.Embedding(config.vocab_size, config.word_size)
        self.pos1_embedding = nn.Embedding(config.pos_num, config.pos_size, padding_idx=0)
        self.pos2_embedding = nn.Embedding(config.pos_num, config.pos_size, padding_idx=0)
        self.word = None
        self.pos1 = None
        self.pos2 = None

    def forward(self):
        word = self.word_embedding(self.word)
        pos1 = self.pos1_embedding(self.pos1)
        pos2 = self.pos2_embedding(self.pos2)
        return torch.cat((word, pos1, pos2), dim=2)


class Encoder(nn.Module):
    def __init__(self, config):
        super(Encoder, self).__init__()
        self.config = config
        in_dim = config.word_size + 2 * config.pos_size
        self.cnn = nn.Conv1d(in_dim, config.hidden_size, config.window_size, padding=1)

    def forward(self, embedding):
        x = self.cnn(embedding.transpose(1, 2))
        x, _ = torch.max(x, dim=2)
        return torch.tanh(x)


class Selector(nn.Module):
    def __init__(self, config, relation_dim):
        super(Selector, self).__init__()
        self.config = config
        self.relation_matrix = nn.Embedding(config.num_classes, relation_dim)
        self.bias = nn.Parameter(torch.zeros(config.num_classes))
        self.attention_matrix = nn.Embedding(config.num_classes, relation_dim)
        self.scope = None
        self.attention_query = None
        self.label = None

    def get_logits(self, x):
        return torch.matmul(x, self.relation_matrix.weight.t()) + self.bias

    def forward(self, x):
        attention = self.attention_matrix(self.attention_query)
        attention_logit = torch.sum(x * attention, 1, True)
        tower_repre = []
        for i in range(len(self.scope) - 1):
            sen_matrix = x[self.scope[i]: self.scope[i + 1]]
            attention_score = F.softmax(torch.transpose(attention_logit[self.scope[i]: self.scope[i + 1]], 0, 1), 1)
            final_repre = torch.squeeze(torch.matmul(attention_score, sen_matrix))
            tower_repre.append(final_repre)
        stack_repre = torch.stack(tower_repre)
        logits = self.get_logits(stack_repre)
        return logits


class Classifier(nn.Module):
    def __init__(self, config):
        super(Classifier, self).__init__()
        self.config = config
        self.label = None
        self.loss = nn.CrossEntropyLoss()

    def forward(self, logits):
        loss = self.loss(logits, self.label)
        _, output = torch.max(logits, dim=1)
        return loss, output.data


class PCNN_ATT(nn.Module):
    def __init__(self, config):
        super(PCNN_ATT, self).__init__()
        self.config = config
        self.embedding = Embedding(config)
        self.encoder = Encoder(config)
        self.selector = Selector(config, config.hidden_size)
        self.classifier = Classifier(config)

    def forward(self):
        embedding = self.embedding()
        sen_embedding = self.encoder(embedding)
        logits = self.selector(sen_embedding)
        return self.classifier(logits)


class Config(object):
    def __init__(self):
        self.acc_NA = Accuracy()
        self.acc_not_NA = Accuracy()
        self.acc_total = Accuracy()
        self.vocab_size = 40
        self.word_size = 8
        self.pos_num = 20
        self.pos_size = 3
        self.hidden_size = 12
        self.window_size = 3
        self.num_classes = 4
        self.max_length = 10
        self.batch_size = 4
        self.max_epoch = 2
        self.learning_rate = 0.5
        self.weight_decay = 1e-5
        self.trainModel = None

    def load_train_data(self):
        n_sent = 12
        self.data_train_word = np.random.randint(0, self.vocab_size, (n_sent, self.max_length))
        self.data_train_pos1 = np.random.randint(1, self.pos_num, (n_sent, self.max_length))
        self.data_train_pos2 = np.random.randint(1, self.pos_num, (n_sent, self.max_length))
        self.data_train_label = np.random.randint(0, self.num_classes, n_sent)
        self.data_train_scope = np.array([[3 * i, 3 * i + 2] for i in range(n_sent // 3)])
        self.train_order = list(range(len(self.data_train_scope)))
        self.train_batches = len(self.data_train_scope) // self.batch_size

    def set_train_model(self, model):
        self.trainModel = model(config=self)
        self.optimizer = optim.SGD(self.trainModel.parameters(), lr=self.learning_rate,
                                   weight_decay=self.weight_decay)

    def get_train_batch(self, batch):
        input_scope = np.take(self.data_train_scope, self.train_order[batch * self.batch_size: (batch + 1) * self.batch_size], axis=0)
        index = []
        scope = [0]
        for num in input_scope:
            index = index + list(range(num[0], num[1] + 1))
            scope.append(scope[len(scope) - 1] + num[1] - num[0] + 1)
        self.batch_word = self.data_train_word[index, :]
        self.batch_pos1 = self.data_train_pos1[index, :]
        self.batch_pos2 = self.data_train_pos2[index, :]
        self.batch_label = np.take(self.data_train_label, input_scope[:, 0], axis=0)
        self.batch_attention_query = self.data_train_label[index]
        self.batch_scope = scope

    def train_one_step(self):
        self.trainModel.embedding.word = to_var(self.batch_word)
        self.trainModel.embedding.pos1 = to_var(self.batch_pos1)
        self.trainModel.embedding.pos2 = to_var(self.batch_pos2)
        self.trainModel.classifier.label = to_var(self.batch_label)
        self.trainModel.selector.scope = self.batch_scope
        self.trainModel.selector.attention_query = to_var(self.batch_attention_query)
        self.trainModel.selector.label = to_var(self.batch_label)
        self.optimizer.zero_grad()
        loss, _output = self.trainModel()
        loss.backward()
        self.optimizer.step()
        for i, prediction in enumerate(_output):
            if self.batch_label[i] == 0:
                self.acc_NA.add(prediction == self.batch_label[i])
            else:
                self.acc_not_NA.add(prediction == self.batch_label[i])
            self.acc_total.add(prediction == self.batch_label[i])
        return loss.data[0]

    def train(self):
        for epoch in range(self.max_epoch):
            self.acc_NA.clear()
            self.acc_not_NA.clear()
            self.acc_total.clear()
            np.random.shuffle(self.train_order)
            for batch in range(self.train_batches):
                self.get_train_batch(batch)
                loss = self.train_one_step()
                print("epoch %d step %d | loss: %f, NA accuracy: %f, not NA accuracy: %f, total accuracy: %f" %
                      (epoch, batch, loss, self.acc_NA.get(), self.acc_not_NA.get(), self.acc_total.get()))


if __name__ == "__main__":
    con = Config()
    con.load_train_data()
    con.set_train_model(PCNN_ATT)
    try:
        con.train()
        err = None
    except IndexError as e:
        err = str(e)
    assert err is not None and "invalid index of a 0-dim tensor" in err, err
    print("evidence holds: train() stops with IndexError: " + err)
