# source: https://github.com/dalinvip/pytorch_word2vec/issues/2
# category: DL201
# expect: flag 32, 33, 43, 44
# evidence: after CBOW training steps with SGD, u_embeddings.weight.grad is None and the context embeddings are bit-identical to their initial values, only v_embeddings moves.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


class CBOW(nn.Module):
    def __init__(self, emb_size, emb_dimension):
        super(CBOW, self).__init__()
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.u_embeddings = nn.Embedding(2 * emb_size - 1, emb_dimension, sparse=True)
        self.v_embeddings = nn.Embedding(2 * emb_size - 1, emb_dimension, sparse=True)
        self.init_emb()

    def init_emb(self):
        initrange = 0.5 / self.emb_dimension
        self.u_embeddings.weight.data.uniform_(-initrange, initrange)
        self.v_embeddings.weight.data.uniform_(-0, 0)

    def forward(self, pos_u, pos_v, neg_u, neg_v):
        losses = []
        emb_u = []
        for i in range(len(pos_u)):
            emb_ui = self.u_embeddings(Variable(torch.LongTensor(pos_u[i])))
            emb_u.append(np.sum(emb_ui.data.numpy(), axis=0).tolist())
        emb_u = Variable(torch.FloatTensor(emb_u))
        emb_v = self.v_embeddings(Variable(torch.LongTensor(pos_v)))
        score = torch.mul(emb_u, emb_v)
        score = torch.sum(score, dim=1)
        score = F.logsigmoid(score)
        losses.append(sum(score))

        neg_emb_u = []
        for i in range(len(neg_u)):
            neg_emb_ui = self.u_embeddings(Variable(torch.LongTensor(neg_u[i])))
            neg_emb_u.append(np.sum(neg_emb_ui.data.numpy(), axis=0).tolist())
        neg_emb_u = Variable(torch.FloatTensor(neg_emb_u))
        neg_emb_v = self.v_embeddings(Variable(torch.LongTensor(neg_v)))
        neg_score = torch.mul(neg_emb_u, neg_emb_v)
        neg_score = torch.sum(neg_score, dim=1)
        neg_score = F.logsigmoid(-1 * neg_score)
        losses.append(sum(neg_score))
        return -1 * sum(losses)


class Word2Vec:
    def __init__(self, emb_size=20, emb_dimension=8, batch_size=6, context_size=2, initial_lr=0.5):
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.batch_size = batch_size
        self.context_size = context_size
        self.initial_lr = initial_lr
        self.cbow_model = CBOW(self.emb_size, self.emb_dimension)
        self.optimizer = optim.SGD(self.cbow_model.parameters(), lr=self.initial_lr)

    def get_cbow_pairs(self, rng):
        # stands in for InputData.get_cbow_batch_all_pairs + negative sampling
        pos_pairs = [(rng.randint(0, self.emb_size, 2 * self.context_size).tolist(), rng.randint(0, self.emb_size))
                     for _ in range(self.batch_size)]
        neg_pairs = [(ctx, rng.randint(0, self.emb_size)) for ctx, _ in pos_pairs]
        return pos_pairs, neg_pairs

    def cbow_train(self, steps=5):
        rng = np.random.RandomState(0)
        losses = []
        for i in range(steps):
            pos_pairs, neg_pairs = self.get_cbow_pairs(rng)
            pos_u = [pair[0] for pair in pos_pairs]
            pos_v = [int(pair[1]) for pair in pos_pairs]
            neg_u = [pair[0] for pair in neg_pairs]
            neg_v = [int(pair[1]) for pair in neg_pairs]

            self.optimizer.zero_grad()
            loss = self.cbow_model.forward(pos_u, pos_v, neg_u, neg_v)
            loss.backward()
            self.optimizer.step()
            losses.append(loss.item())
        return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    w2v = Word2Vec()
    u_before = w2v.cbow_model.u_embeddings.weight.detach().clone()
    v_before = w2v.cbow_model.v_embeddings.weight.detach().clone()
    w2v.cbow_train(steps=5)
    u_w = w2v.cbow_model.u_embeddings.weight
    v_w = w2v.cbow_model.v_embeddings.weight
    assert u_w.grad is None, "u_embeddings unexpectedly received a gradient"
    with torch.no_grad():
        assert torch.equal(u_w, u_before), "u_embeddings changed"
        assert not torch.equal(v_w, v_before), "v_embeddings should train"
    print("evidence holds: u_embeddings.grad is None and u_embeddings never change; only v_embeddings train")
