# source: https://github.com/ccsasuke/umwe/issues/5
# category: DL402
# expect: flag 21, 22
# evidence: the evaluator passes mapped embeddings straight out of the trainable mapping (they require grad) to get_sent_translation_accuracy, whose emb.cpu().numpy() raises "Can't call numpy() on Tensor that requires grad".
import numpy as np
import torch
import torch.nn as nn


def bow_idf(sentences, word_vec, idf_dict=None):
    embeddings = []
    for sent in sentences:
        words = [w for w in sent if w in word_vec]
        vec = np.sum([word_vec[w] for w in words], axis=0) if words else np.zeros(len(next(iter(word_vec.values()))))
        embeddings.append(vec / max(len(words), 1))
    return np.vstack(embeddings)


def get_sent_translation_accuracy(data, lg1, word2id1, emb1, lg2, word2id2, emb2,
                                  n_keys, n_queries, method, idf):
    emb1 = emb1.cpu().numpy()
    emb2 = emb2.cpu().numpy()

    word_vec1 = dict([(w, emb1[word2id1[w]]) for w in word2id1])
    word_vec2 = dict([(w, emb2[word2id2[w]]) for w in word2id2])
    keys = bow_idf(data[lg1][:n_keys], word_vec1, idf_dict=idf)
    queries = bow_idf(data[lg2][:n_queries], word_vec2, idf_dict=idf)

    queries = torch.from_numpy(queries).float()
    queries = queries / queries.norm(2, 1, keepdim=True).expand_as(queries)
    keys = torch.from_numpy(keys).float()
    keys = keys / keys.norm(2, 1, keepdim=True).expand_as(keys)
    scores = keys.mm(queries.transpose(0, 1)).transpose(0, 1)
    top_k = scores.topk(1, 1, True)[1]
    return (top_k[:, 0] == torch.arange(len(top_k))).float().mean().item() * 100


class Evaluator(object):
    def __init__(self, trainer):
        self.embs = trainer.embs
        self.mappings = trainer.mappings
        self.dicos = trainer.dicos
        self.langs = trainer.langs
        self.europarl_data = trainer.europarl_data

    def sent_translation(self, to_log):
        lg1, lg2 = self.langs[0], self.langs[1]
        n_keys, n_queries = 4, 4
        src_emb = self.mappings[lg1](self.embs[lg1].weight)
        tgt_emb = self.mappings[lg2](self.embs[lg2].weight)
        for method in ['nn', 'csls_knn_10']:
            acc = get_sent_translation_accuracy(
                self.europarl_data,
                lg1, self.dicos[lg1], src_emb,
                lg2, self.dicos[lg2], tgt_emb,
                n_keys=n_keys, n_queries=n_queries,
                method=method, idf=None,
            )
            to_log['%s_to_%s_%s' % (lg1, lg2, method)] = acc

    def all_eval(self, to_log):
        self.sent_translation(to_log)


class UMWETrainer(object):
    def __init__(self, langs, vocab=6, dim=5):
        self.langs = langs
        self.embs = {lg: nn.Embedding(vocab, dim) for lg in langs}
        for emb in self.embs.values():
            emb.weight.requires_grad = False
        self.mappings = {lg: nn.Linear(dim, dim, bias=False) for lg in langs}
        self.dicos = {lg: {'%s_w%d' % (lg, i): i for i in range(vocab)} for lg in langs}
        self.europarl_data = {lg: [['%s_w%d' % (lg, (i + j) % vocab) for j in range(3)] for i in range(4)]
                              for lg in langs}
        params = [p for m in self.mappings.values() for p in m.parameters()]
        self.map_optimizer = torch.optim.SGD(params, lr=0.1)

    def mapping_step(self):
        lg1, lg2 = self.langs
        src = self.mappings[lg1](self.embs[lg1].weight)
        tgt = self.mappings[lg2](self.embs[lg2].weight)
        loss = ((src - tgt) ** 2).mean()
        self.map_optimizer.zero_grad()
        loss.backward()
        self.map_optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = UMWETrainer(['de', 'en'])
    evaluator = Evaluator(trainer)
    to_log = {}
    for n_epoch in range(2):
        trainer.mapping_step()
    try:
        evaluator.all_eval(to_log)
    except RuntimeError as e:
        msg = str(e)
    else:
        raise AssertionError("expected numpy() to fail")
    assert "Can't call numpy() on Tensor that requires grad" in msg, msg
    assert to_log == {}
    print("evidence holds: evaluator.all_eval raised RuntimeError: %s" % msg)
