# source: https://github.com/edreisMD/ConVIRT-pytorch/issues/7
# category: DL201
# expect: flag 54
# evidence: after a full training step the text projection head (bert_l1, bert_l2) and the unfrozen text encoder layers, all owned by the Adam optimizer, have grad None and never change, while the image branch does train.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TinyBert(nn.Module):
    """Stand-in for AutoModel.from_pretrained(bert_base_model): returns (token_embeddings,)."""
    def __init__(self, vocab=50, hidden=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.encoder = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(2)])

    def forward(self, input_ids, attention_mask):
        h = self.embeddings(input_ids)
        for layer in self.encoder:
            h = torch.tanh(layer(h))
        return (h,)


class ModelCLR(nn.Module):
    def __init__(self, out_dim=8, hidden=16, num_ftrs=12):
        super(ModelCLR, self).__init__()
        self.bert_model = TinyBert(hidden=hidden)
        self.bert_l1 = nn.Linear(hidden, hidden)
        self.bert_l2 = nn.Linear(hidden, out_dim)
        self.res_features = nn.Sequential(nn.Conv2d(3, num_ftrs, 3), nn.AdaptiveAvgPool2d(1))
        self.res_l1 = nn.Linear(num_ftrs, num_ftrs)
        self.res_l2 = nn.Linear(num_ftrs, out_dim)

    def mean_pooling(self, model_output, attention_mask):
        token_embeddings = model_output[0]
        input_mask_expanded = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
        sum_embeddings = torch.sum(token_embeddings * input_mask_expanded, 1)
        sum_mask = torch.clamp(input_mask_expanded.sum(1), min=1e-9)
        return sum_embeddings / sum_mask

    def image_encoder(self, xis):
        h = self.res_features(xis)
        h = h.squeeze()
        x = self.res_l1(h)
        x = F.relu(x)
        x = self.res_l2(x)
        return h, x

    def text_encoder(self, encoded_inputs):
        outputs = self.bert_model(**encoded_inputs)
        # (the original also calls .half() here for apex O2; dropped to stay in float32 on CPU)
        with torch.no_grad():
            sentence_embeddings = self.mean_pooling(outputs, encoded_inputs['attention_mask'])
            x = self.bert_l1(sentence_embeddings)
            x = F.relu(x)
            out_emb = self.bert_l2(x)
        return out_emb

    def forward(self, xis, encoded_inputs):
        h, zis = self.image_encoder(xis)
        zls = self.text_encoder(encoded_inputs)
        return zis, zls


def nt_xent(zis, zls, temperature=0.1):
    zis = F.normalize(zis, dim=1)
    zls = F.normalize(zls, dim=1)
    logits = zis @ zls.t() / temperature
    labels = torch.arange(zis.size(0))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


if __name__ == "__main__":
    model = ModelCLR()
    optimizer = torch.optim.Adam(model.parameters(), 1e-2, weight_decay=1e-6)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for step in range(3):
        xis = torch.randn(4, 3, 8, 8)
        xls = {"input_ids": torch.randint(0, 50, (4, 6)),
               "attention_mask": torch.ones(4, 6, dtype=torch.long)}
        optimizer.zero_grad()
        zis, zls = model(xis, xls)
        loss = nt_xent(zis, zls)
        loss.backward()
        optimizer.step()
    for name in ["bert_l1.weight", "bert_l2.weight", "bert_model.encoder.0.weight"]:
        p = dict(model.named_parameters())[name]
        assert p.grad is None, name
        assert torch.equal(p.detach(), before[name]), name
    assert model.res_l2.weight.grad is not None
    assert not torch.equal(model.res_l2.weight.detach(), before["res_l2.weight"])
    print("evidence holds: text-side parameters owned by the optimizer get grad None and never change; image side trains")
