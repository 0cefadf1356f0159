# source: https://github.com/xiaxin1998/DHCN/issues/8
# category: DL402
# expect: flag 31
# evidence: HyperConv.forward sums its per-layer item embeddings (computed from the embedding weight) with np.sum, which converts grad-carrying tensors and raises "Can't call numpy() on Tensor that requires grad" on the first training batch
import numpy as np
import torch
from torch import nn
from torch.nn import Module


def trans_to_cuda(variable):
    if torch.cuda.is_available():
        return variable.cuda()
    return variable


class HyperConv(Module):
    def __init__(self, layers, dataset, emb_size=100):
        super(HyperConv, self).__init__()
        self.emb_size = emb_size
        self.layers = layers
        self.dataset = dataset

    def forward(self, adjacency, embedding):
        item_embeddings = embedding
        item_embedding_layer0 = item_embeddings
        final = [item_embedding_layer0]
        for i in range(self.layers):
            item_embeddings = torch.sparse.mm(trans_to_cuda(adjacency), item_embeddings)
            final.append(item_embeddings)
        item_embeddings = np.sum(final, 0) / (self.layers + 1)
        return item_embeddings


class DHCN(Module):
    def __init__(self, adjacency, n_node, lr, layers, l2, dataset, emb_size=100):
        super(DHCN, self).__init__()
        self.emb_size = emb_size
        self.n_node = n_node
        self.L2 = l2
        self.layers = layers
        self.adjacency = adjacency
        self.embedding = nn.Embedding(self.n_node, self.emb_size)
        self.HyperGraph = HyperConv(self.layers, dataset, emb_size)
        self.loss_function = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr)

    def generate_sess_emb(self, item_embedding, session_item, session_len):
        zeros = torch.zeros(1, self.emb_size)
        item_embedding = torch.cat([zeros, item_embedding], 0)
        seq_h = item_embedding[session_item]
        return seq_h.sum(1) / session_len

    def forward(self, session_item, session_len):
        item_embeddings_hg = self.HyperGraph(self.adjacency, self.embedding.weight)
        sess_emb_hgnn = self.generate_sess_emb(item_embeddings_hg, session_item, session_len)
        return item_embeddings_hg, sess_emb_hgnn


def forward(model, session_item, session_len, tar):
    item_emb_hg, sess_emb_hgnn = model(session_item, session_len)
    scores = torch.mm(sess_emb_hgnn, torch.transpose(item_emb_hg, 1, 0))
    return tar, scores


def train_test(model, train_batches):
    model.train()
    total_loss = 0.0
    for session_item, session_len, tar in train_batches:
        model.zero_grad()
        targets, scores = forward(model, session_item, session_len, tar)
        loss = model.loss_function(scores + 1e-8, targets)
        loss.backward()
        model.optimizer.step()
        total_loss += loss.item()
    return total_loss


def build_adjacency(n_node, n_edges=20):
    rows = torch.randint(0, n_node, (n_edges,))
    cols = torch.randint(0, n_node, (n_edges,))
    vals = torch.rand(n_edges) / 4
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (n_node, n_node), check_invariants=True).coalesce()


if __name__ == "__main__":
    torch.manual_seed(0)
    n_node, emb = 10, 8
    model = DHCN(build_adjacency(n_node), n_node, lr=1e-3, layers=2, l2=1e-5, dataset='toy', emb_size=emb)
    batches = [(torch.randint(1, n_node + 1, (4, 3)), torch.full((4, 1), 3.0), torch.randint(0, n_node, (4,)))]
    w0 = model.embedding.weight.detach().clone()

    try:
        train_test(model, batches)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised
    assert torch.equal(w0, model.embedding.weight.detach())
    print("evidence holds: np.sum over the grad-carrying layer embeddings raises in the first forward pass")
