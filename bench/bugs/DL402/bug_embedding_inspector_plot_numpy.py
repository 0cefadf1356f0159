# source: https://github.com/tkalayci71/embedding-inspector/issues/22
# category: DL402
# expect: flag 59
# evidence: do_inspect indexes the text encoder's token-embedding weight (a Parameter that requires grad) and calls .numpy() on the row to plot it, which raises "Can't call numpy() on Tensor that requires grad".
import torch
import torch.nn as nn
import numpy as np


class FakePlt:
    """Stand-in for matplotlib.pyplot: stores what would be drawn."""
    def __init__(self):
        self.lines = []

    def figure(self, **kw):
        self.lines = []

    def plot(self, x, y):
        self.lines.append((np.asarray(x), np.asarray(y)))


plt = FakePlt()


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.wrapped = nn.Embedding(vocab_size, dim)


class FrozenCLIPEmbedder(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.token_embedding = TokenEmbedding(len(vocab), 12)

    def tokenize(self, text):
        return [self.vocab[w] for w in text.split() if w in self.vocab]


embedder = FrozenCLIPEmbedder({"a": 0, "photo": 1, "of": 2, "cat": 3, "dog": 4})


def do_inspect(text):
    # get the embedder's internal token embeddings
    internal_embs = embedder.token_embedding.wrapped.weight
    token_ids = embedder.tokenize(text)
    if len(token_ids) == 0:
        return "no tokens"
    results = []
    emb_vec = internal_embs[token_ids]
    for u, tid in enumerate(token_ids):
        vec_mag = torch.linalg.norm(emb_vec[u]).item()
        results.append("token %d magnitude %.4f" % (tid, vec_mag))
    # graph of the embedding values
    plt.figure(figsize=(8, 4))
    x = torch.arange(emb_vec.shape[1])
    for u in range(len(token_ids)):
        plt.plot(x.numpy(), emb_vec[u].numpy())
    return "\n".join(results)


if __name__ == "__main__":
    torch.manual_seed(0)
    try:
        do_inspect("a photo of cat")
        raise AssertionError("expected .numpy() to fail")
    except RuntimeError as e:
        assert "Can't call numpy() on Tensor that requires grad" in str(e), str(e)
    assert embedder.token_embedding.wrapped.weight.requires_grad
    print("evidence holds: plotting emb_vec[u].numpy() raised:", "Can't call numpy() on Tensor that requires grad")
