# source: https://forum.opennmt.net/t/why-variable-rewrap-unwrap-in-memoryefficientloss/482
# category: DL701
# expect: flag 30, 66, 91, 93
# evidence: validation relies on volatile batches and on Variable(outputs.data, volatile=eval); volatile is ignored, so the encoder-decoder and every generator shard record autograd graphs during eval()
import warnings
from types import SimpleNamespace

import torch
import torch.nn as nn
from torch.autograd import Variable

PAD = 0
opt = SimpleNamespace(max_generator_batches=2, word_vec_size=8, rnn_size=8)


class Dataset(object):
    def __init__(self, srcData, tgtData, batchSize, volatile=False):
        self.src = srcData
        self.tgt = tgtData
        self.batchSize = batchSize
        self.numBatches = (len(self.src) + batchSize - 1) // batchSize
        self.volatile = volatile

    def _batchify(self, data):
        max_length = max(x.size(0) for x in data)
        out = data[0].new_full((len(data), max_length), PAD)
        for i in range(len(data)):
            out[i].narrow(0, 0, data[i].size(0)).copy_(data[i])
        out = out.t().contiguous()
        return Variable(out, volatile=self.volatile)

    def __getitem__(self, index):
        srcBatch = self._batchify(self.src[index * self.batchSize:(index + 1) * self.batchSize])
        tgtBatch = self._batchify(self.tgt[index * self.batchSize:(index + 1) * self.batchSize])
        return srcBatch, tgtBatch

    def __len__(self):
        return self.numBatches


class NMTModel(nn.Module):
    def __init__(self, vocab_size):
        super(NMTModel, self).__init__()
        self.src_emb = nn.Embedding(vocab_size, opt.word_vec_size, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(vocab_size, opt.word_vec_size, padding_idx=PAD)
        self.encoder = nn.LSTM(opt.word_vec_size, opt.rnn_size)
        self.decoder = nn.LSTM(opt.word_vec_size, opt.rnn_size)
        self.generator = nn.Sequential(nn.Linear(opt.rnn_size, vocab_size), nn.LogSoftmax(dim=-1))

    def forward(self, input):
        src, tgt = input
        _, enc_hidden = self.encoder(self.src_emb(src))
        out, _ = self.decoder(self.tgt_emb(tgt[:-1]), enc_hidden)
        return out


def NMTCriterion(vocabSize):
    weight = torch.ones(vocabSize)
    weight[PAD] = 0
    return nn.NLLLoss(weight, reduction='sum')


def memoryEfficientLoss(outputs, targets, generator, crit, eval=False):
    # compute generations one piece at a time
    num_correct, loss = 0, 0
    outputs = Variable(outputs.data, requires_grad=(not eval), volatile=eval)

    batch_size = outputs.size(1)
    outputs_split = torch.split(outputs, opt.max_generator_batches)
    targets_split = torch.split(targets, opt.max_generator_batches)
    for i, (out_t, targ_t) in enumerate(zip(outputs_split, targets_split)):
        out_t = out_t.view(-1, out_t.size(2))
        scores_t = generator(out_t)
        loss_t = crit(scores_t, targ_t.view(-1))
        pred_t = scores_t.max(1)[1]
        num_correct += pred_t.eq(targ_t.view(-1)).masked_select(targ_t.view(-1).ne(PAD)).sum().item()
        loss += loss_t.item()
        if not eval:
            loss_t.div(batch_size).backward()

    grad_output = None if outputs.grad is None else outputs.grad
    return loss, grad_output, num_correct


def eval(model, criterion, data):
    total_loss = 0
    total_words = 0
    total_num_correct = 0

    model.eval()
    for i in range(len(data)):
        batch = data[i]
        outputs = model(batch)
        targets = batch[1][1:]  # exclude <s> from targets
        loss, _, num_correct = memoryEfficientLoss(outputs, targets, model.generator, criterion, eval=True)
        total_loss += loss
        total_num_correct += num_correct
        total_words += targets.ne(PAD).sum().item()

    model.train()
    return total_loss / total_words, total_num_correct / total_words


def trainEpoch(model, criterion, trainData, optim):
    model.train()
    for i in range(len(trainData)):
        batch = trainData[i]
        model.zero_grad()
        outputs = model(batch)
        targets = batch[1][1:]
        loss, gradOutput, num_correct = memoryEfficientLoss(outputs, targets, model.generator, criterion)
        outputs.backward(gradOutput)
        optim.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab = 12
    sents = lambda n: [torch.randint(1, vocab, (int(torch.randint(3, 6, (1,))),)) for _ in range(n)]
    trainData = Dataset(sents(8), sents(8), batchSize=4)
    validData = Dataset(sents(4), sents(4), batchSize=2, volatile=True)
    model = NMTModel(vocab)
    criterion = NMTCriterion(vocab)
    optim = torch.optim.SGD(model.parameters(), lr=0.1)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainEpoch(model, criterion, trainData, optim)
        decoder_graphs, generator_graphs = [], []
        h1 = model.decoder.register_forward_hook(lambda m, i, o: decoder_graphs.append(o[0].grad_fn is not None))
        h2 = model.generator.register_forward_hook(lambda m, i, o: generator_graphs.append(o.grad_fn is not None))
        valid_loss, valid_acc = eval(model, criterion, validData)
        h1.remove()
        h2.remove()

    assert any("volatile was removed" in str(w.message) for w in caught)
    assert decoder_graphs == [True] * len(validData)  # volatile batches no longer stop graph building
    assert generator_graphs and all(generator_graphs)  # nor does Variable(outputs.data, volatile=True)
    print("evidence holds: eval() depends on volatile, which is a no-op: every validation shard builds a graph")
