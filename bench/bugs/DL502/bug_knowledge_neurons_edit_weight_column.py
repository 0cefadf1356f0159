# source: https://github.com/Hunter-DDM/knowledge-neurons/issues/14
# category: DL502
# expect: flag 54, 55
# evidence: editing a column of the FFN output weight in place raises "a view of a leaf Variable that requires grad is being used in an in-place operation." and no weight is edited
import torch
import torch.nn as nn


class BertOutput(nn.Module):
    def __init__(self, intermediate, hidden):
        super().__init__()
        self.dense = nn.Linear(intermediate, hidden)


class BertLayer(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = BertOutput(intermediate, hidden)

    def forward(self, h):
        return h + self.output.dense(torch.relu(self.intermediate(h)))


class BertEncoder(nn.Module):
    def __init__(self, n_layers, hidden, intermediate):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(hidden, intermediate) for _ in range(n_layers)])


class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)


class Bert(nn.Module):
    def __init__(self, vocab=50, hidden=8, intermediate=16, n_layers=2):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden)
        self.encoder = BertEncoder(n_layers, hidden, intermediate)


class BertForMaskedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.bert = Bert()


def edit_knowledge(model, kn_bag, ori_pred_id, tgt_id, lambda_list_1, lambda_list_2):
    ori_pred_emb = model.bert.embeddings.word_embeddings.weight[ori_pred_id]
    tgt_emb = model.bert.embeddings.word_embeddings.weight[tgt_id]
    for i, (layer, pos) in enumerate(kn_bag):
        model.bert.encoder.layer[layer].output.dense.weight[:, pos] -= ori_pred_emb * lambda_list_1[i]
        model.bert.encoder.layer[layer].output.dense.weight[:, pos] += tgt_emb * lambda_list_2[i]
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    model = BertForMaskedLM()
    before = model.bert.encoder.layer[1].output.dense.weight.detach().clone()
    kn_bag = [(1, 3), (0, 7)]
    try:
        edit_knowledge(model, kn_bag, ori_pred_id=5, tgt_id=9, lambda_list_1=[1.0, 1.0], lambda_list_2=[8.0, 8.0])
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised == "a view of a leaf Variable that requires grad is being used in an in-place operation.", raised
    assert torch.equal(model.bert.encoder.layer[1].output.dense.weight.detach(), before)
    print("evidence holds: the in-place column edit of the dense weight raises the leaf in-place error")
