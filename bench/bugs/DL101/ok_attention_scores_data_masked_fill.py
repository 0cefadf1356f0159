# source: https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/16
# category: DL101
# expect: clean
# evidence: masking the pre-softmax scores through attn.data.masked_fill_ gives exactly the same gradients as the out-of-place masked_fill, and the projections train.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init


class BottleSoftmax(nn.Softmax):
    """Softmax over the last dim of a 3-d tensor (the repository's Bottle helper)."""

    def forward(self, input):
        size = input.size()
        out = super().forward(input.view(size[0] * size[1], -1))
        return out.view(size)


class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_model, attn_dropout=0.1, use_data_mask=True):
        super().__init__()
        self.temper = np.power(d_model, 0.5)
        self.dropout = nn.Dropout(attn_dropout)
        self.softmax = BottleSoftmax(dim=1)
        self.use_data_mask = use_data_mask

    def forward(self, q, k, v, attn_mask=None):
        attn = torch.bmm(q, k.transpose(1, 2)) / self.temper
        if attn_mask is not None:
            assert attn_mask.size() == attn.size()
            if self.use_data_mask:
                attn.data.masked_fill_(attn_mask, -float("inf"))
            else:
                attn = attn.masked_fill(attn_mask, -float("inf"))
        attn = self.softmax(attn)
        attn = self.dropout(attn)
        output = torch.bmm(attn, v)
        return output, attn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1, use_data_mask=True):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Parameter(torch.FloatTensor(n_head, d_model, d_k))
        self.w_ks = nn.Parameter(torch.FloatTensor(n_head, d_model, d_k))
        self.w_vs = nn.Parameter(torch.FloatTensor(n_head, d_model, d_v))
        self.attention = ScaledDotProductAttention(d_model, use_data_mask=use_data_mask)
        self.proj = nn.Linear(n_head * d_v, d_model)
        self.dropout = nn.Dropout(dropout)
        init.xavier_normal_(self.w_qs)
        init.xavier_normal_(self.w_ks)
        init.xavier_normal_(self.w_vs)

    def forward(self, q, k, v, attn_mask=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        residual = q
        mb_size, len_q, d_model = q.size()
        mb_size, len_k, d_model = k.size()
        q_s = q.repeat(n_head, 1, 1).view(n_head, -1, d_model)
        k_s = k.repeat(n_head, 1, 1).view(n_head, -1, d_model)
        v_s = v.repeat(n_head, 1, 1).view(n_head, -1, d_model)
        q_s = torch.bmm(q_s, self.w_qs).view(-1, len_q, d_k)
        k_s = torch.bmm(k_s, self.w_ks).view(-1, len_k, d_k)
        v_s = torch.bmm(v_s, self.w_vs).view(-1, len_k, d_v)
        outputs, attns = self.attention(q_s, k_s, v_s, attn_mask=attn_mask.repeat(n_head, 1, 1))
        outputs = torch.cat(torch.split(outputs, mb_size, dim=0), dim=-1)
        outputs = self.dropout(self.proj(outputs))
        return outputs + residual, attns


def get_attn_padding_mask(seq_q, seq_k, pad=0):
    mb_size, len_q = seq_q.size()
    mb_size, len_k = seq_k.size()
    pad_attn_mask = seq_k.eq(pad).unsqueeze(1)
    return pad_attn_mask.expand(mb_size, len_q, len_k)


def one_step(use_data_mask, src_seq, emb_weight, target):
    torch.manual_seed(1)
    layer = MultiHeadAttention(n_head=2, d_model=8, d_k=4, d_v=4, use_data_mask=use_data_mask)
    emb = nn.Embedding.from_pretrained(emb_weight.clone(), freeze=False)
    optimizer = torch.optim.SGD(list(layer.parameters()) + list(emb.parameters()), lr=0.1)
    x = emb(src_seq)
    mask = get_attn_padding_mask(src_seq, src_seq)
    torch.manual_seed(2)  # same dropout masks for both variants
    out, _ = layer(x, x, x, attn_mask=mask)
    loss = ((out - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    grads = [p.grad.detach().clone() for p in list(layer.parameters()) + list(emb.parameters())]
    before = layer.w_qs.detach().clone()
    optimizer.step()
    return grads, before, layer.w_qs.detach().clone()


if __name__ == "__main__":
    torch.manual_seed(0)
    src_seq = torch.tensor([[5, 3, 7, 0, 0], [2, 9, 4, 6, 0]])
    emb_weight = torch.randn(10, 8)
    target = torch.randn(2, 5, 8)

    g_data, w_before, w_after = one_step(True, src_seq, emb_weight, target)
    g_ref, _, _ = one_step(False, src_seq, emb_weight, target)

    with torch.no_grad():
        for a, b in zip(g_data, g_ref):
            assert torch.isfinite(a).all()
            assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()
        assert not torch.equal(w_before, w_after)
    print("evidence holds: .data masking before softmax gives the same gradients as masked_fill and the weights update")
