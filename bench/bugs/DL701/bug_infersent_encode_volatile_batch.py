# source: https://github.com/facebookresearch/InferSent/issues/87
# category: DL701
# expect: flag 65, 66, 69
# evidence: encode() relies on Variable(..., volatile=True), which now does nothing: every batch's forward pass records an autograd graph through the BiLSTM encoder
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable


class InferSent(nn.Module):
    def __init__(self, config):
        super(InferSent, self).__init__()
        self.bsize = config['bsize']
        self.word_emb_dim = config['word_emb_dim']
        self.enc_lstm_dim = config['enc_lstm_dim']
        self.pool_type = config['pool_type']
        self.enc_lstm = nn.LSTM(self.word_emb_dim, self.enc_lstm_dim, 1, bidirectional=True)
        self.word_vec = {}

    def forward(self, sent_tuple):
        # sent: (seqlen x bsize x worddim)
        sent, sent_len = sent_tuple
        sent_output = self.enc_lstm(sent)[0]
        if self.pool_type == "mean":
            emb = torch.sum(sent_output, 0) / torch.FloatTensor(sent_len.copy()).unsqueeze(1)
        else:
            emb = torch.max(sent_output, 0)[0]
        return emb

    def build_vocab(self, sentences, dim):
        rng = np.random.RandomState(0)
        for s in sentences:
            for w in s.split():
                self.word_vec.setdefault(w, rng.randn(dim).astype(np.float32))
        self.word_vec['<s>'] = rng.randn(dim).astype(np.float32)
        self.word_vec['</s>'] = rng.randn(dim).astype(np.float32)

    def get_batch(self, batch):
        # sent in batch in decreasing order of lengths (bsize, max_len, word_dim)
        embed = np.zeros((len(batch[0]), len(batch), self.word_emb_dim), dtype=np.float32)
        for i in range(len(batch)):
            for j in range(len(batch[i])):
                embed[j, i, :] = self.word_vec[batch[i][j]]
        return torch.FloatTensor(embed)

    def prepare_samples(self, sentences, bsize, tokenize, verbose):
        sentences = [['<s>'] + s.split() + ['</s>'] for s in sentences]
        lengths = np.array([len(s) for s in sentences])
        lengths, idx_sort = np.sort(lengths)[::-1], np.argsort(-lengths)
        sentences = [sentences[i] for i in idx_sort]
        return sentences, lengths, idx_sort

    def is_cuda(self):
        return self.enc_lstm.bias_hh_l0.data.is_cuda

    def encode(self, sentences, bsize=64, tokenize=True, verbose=False):
        tic = time.time()
        sentences, lengths, idx_sort = self.prepare_samples(sentences, bsize, tokenize, verbose)

        embeddings = []
        for stidx in range(0, len(sentences), bsize):
            batch = Variable(self.get_batch(sentences[stidx:stidx + bsize]), volatile=True)
            if self.is_cuda():
                batch = batch.cuda()
            batch = self.forward((batch, lengths[stidx:stidx + bsize])).data.cpu().numpy()
            embeddings.append(batch)
        embeddings = np.vstack(embeddings)

        # restore the caller's order
        idx_unsort = np.argsort(idx_sort)
        embeddings = embeddings[idx_unsort]
        if verbose:
            print('Speed : %.1f sentences/s' % (len(embeddings) / (time.time() - tic)))
        return embeddings


if __name__ == "__main__":
    torch.manual_seed(0)
    params_model = {'bsize': 2, 'word_emb_dim': 6, 'enc_lstm_dim': 4, 'pool_type': 'max', 'dpout_model': 0.0}
    model = InferSent(params_model)
    sentences = ["the cat sat", "a dog ran home fast", "birds fly", "it rains a lot here"]
    model.build_vocab(sentences, params_model['word_emb_dim'])

    graphs = []
    model.enc_lstm.register_forward_hook(lambda m, inp, out: graphs.append(out[0].grad_fn is not None))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        embeddings = model.encode(sentences, bsize=2)

    assert embeddings.shape == (4, 8)
    assert any("volatile was removed" in str(w.message) for w in caught)
    assert graphs == [True, True]  # each inference batch built a backward graph through the LSTM
    print("evidence holds: volatile=True is ignored; encode() records autograd graphs for pure inference")
