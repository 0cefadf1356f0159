# source: https://github.com/d2l-ai/d2l-en/pull/2121
# category: DL201
# expect: flag 35
# evidence: after pretraining steps the learnable pos_embedding has grad None and is unchanged, while the token embedding trains
import torch
from torch import nn


class EncoderBlock(nn.Module):
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout):
        super().__init__()
        self.attention = nn.MultiheadAttention(num_hiddens, num_heads, dropout=dropout, batch_first=True)
        self.ln1 = nn.LayerNorm(num_hiddens)
        self.ffn = nn.Sequential(nn.Linear(num_hiddens, ffn_num_hiddens), nn.ReLU(), nn.Linear(ffn_num_hiddens, num_hiddens))
        self.ln2 = nn.LayerNorm(num_hiddens)

    def forward(self, X, valid_lens):
        mask = torch.arange(X.shape[1])[None, :] >= valid_lens[:, None]
        Y = self.ln1(X + self.attention(X, X, X, key_padding_mask=mask)[0])
        return self.ln2(Y + self.ffn(Y))


class BERTEncoder(nn.Module):
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, max_len=1000):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
        self.segment_embedding = nn.Embedding(2, num_hiddens)
        self.blks = nn.Sequential()
        for i in range(num_blks):
            self.blks.add_module(f"{i}", EncoderBlock(num_hiddens, ffn_num_hiddens, num_heads, dropout))
        self.pos_embedding = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, tokens, segments, valid_lens):
        X = self.token_embedding(tokens) + self.segment_embedding(segments)
        X = X + self.pos_embedding.data[:, :X.shape[1], :]
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X


class MaskLM(nn.Module):
    def __init__(self, vocab_size, num_hiddens):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(num_hiddens, num_hiddens), nn.ReLU(), nn.LayerNorm(num_hiddens), nn.Linear(num_hiddens, vocab_size))

    def forward(self, X, pred_positions):
        batch_idx = torch.arange(X.shape[0]).repeat_interleave(pred_positions.shape[1])
        masked_X = X[batch_idx, pred_positions.reshape(-1)].reshape(X.shape[0], pred_positions.shape[1], -1)
        return self.mlp(masked_X)


class BERTModel(nn.Module):
    def __init__(self, vocab_size, num_hiddens=16, ffn_num_hiddens=32, num_heads=2, num_blks=1, dropout=0.0, max_len=64):
        super().__init__()
        self.encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout, max_len=max_len)
        self.mlm = MaskLM(vocab_size, num_hiddens)

    def forward(self, tokens, segments, valid_lens, pred_positions):
        encoded_X = self.encoder(tokens, segments, valid_lens)
        return encoded_X, self.mlm(encoded_X, pred_positions)


def train_bert(net, batches, vocab_size, lr=0.01):
    loss = nn.CrossEntropyLoss()
    trainer = torch.optim.Adam(net.parameters(), lr=lr)
    for tokens, segments, valid_lens, pred_positions, mlm_Y in batches:
        trainer.zero_grad()
        _, mlm_Y_hat = net(tokens, segments, valid_lens, pred_positions)
        l = loss(mlm_Y_hat.reshape(-1, vocab_size), mlm_Y.reshape(-1))
        l.backward()
        trainer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab_size = 30
    net = BERTModel(vocab_size)
    batches = [(torch.randint(0, vocab_size, (2, 8)), torch.zeros(2, 8, dtype=torch.long), torch.tensor([8, 6]),
                torch.tensor([[1, 2], [3, 4]]), torch.randint(0, vocab_size, (2, 2))) for _ in range(2)]
    pos_before = net.encoder.pos_embedding.detach().clone()
    train_bert(net, batches, vocab_size)
    assert net.encoder.pos_embedding.grad is None
    assert torch.equal(pos_before, net.encoder.pos_embedding)
    assert net.encoder.token_embedding.weight.grad is not None
    print("evidence holds: the learnable positional embedding is read through .data and never trains")
