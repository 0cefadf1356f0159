# source: https://github.com/lucidrains/compressive-transformer-pytorch/issues/5
# category: DL201
# expect: flag 69
# evidence: with memories filled, (loss + aux_loss).backward() leaves the compression conv of every layer with grad None: the reconstruction loss trains nothing
from collections import namedtuple
from functools import partial

import torch
from torch import nn
import torch.nn.functional as F

Memory = namedtuple("Memory", ["mem", "compressed_mem"])


def full_attn(q, k, v, dropout_fn=None):
    *_, dim = q.shape
    dots = torch.einsum("bhid,bhjd->bhij", q, k) * (dim ** -0.5)
    attn = dots.softmax(dim=-1)
    if dropout_fn is not None:
        attn = dropout_fn(attn)
    return torch.einsum("bhij,bhjd->bhid", attn, v)


class ConvCompress(nn.Module):
    def __init__(self, dim, ratio=4):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, ratio, stride=ratio)

    def forward(self, mem):
        return self.conv(mem.transpose(1, 2)).transpose(1, 2)


class SelfAttention(nn.Module):
    def __init__(self, dim, seq_len, mem_len, cmem_len, cmem_ratio=4, heads=2):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.seq_len, self.mem_len, self.cmem_len = seq_len, mem_len, cmem_len
        self.compress_mem_fn = ConvCompress(dim, cmem_ratio)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.reconstruction_attn_dropout = nn.Dropout(0.0)

    def forward(self, x, memories):
        b, t, e, h = *x.shape, self.heads
        mem, cmem = memories
        mem_len = mem.shape[1]
        merge_heads = lambda z: z.reshape(b, -1, h, self.dim_head).transpose(1, 2)

        q = self.to_q(x)
        k, v = self.to_kv(torch.cat((cmem, mem, x), dim=1)).chunk(2, dim=-1)
        q, k, v = map(merge_heads, (q, k, v))
        out = full_attn(q, k, v).transpose(1, 2).reshape(b, t, -1)
        logits = self.to_out(out)

        old_mem, new_mem = torch.cat((mem, x), dim=1)[:, :-self.mem_len], torch.cat((mem, x), dim=1)[:, -self.mem_len:]
        aux_loss = torch.zeros(1, requires_grad=True)
        if old_mem.shape[1] == 0:
            return logits, Memory(new_mem, cmem), aux_loss

        compressed_mem = self.compress_mem_fn(old_mem)
        new_cmem = torch.cat((cmem, compressed_mem), dim=1)[:, -self.cmem_len:]

        cmem_k, cmem_v = self.to_kv(compressed_mem).chunk(2, dim=-1)
        cmem_k, cmem_v = map(merge_heads, (cmem_k, cmem_v))
        old_mem_range = slice(-min(mem_len, self.mem_len) - self.seq_len, -self.seq_len)
        old_mem_k, old_mem_v = map(lambda z: z[:, :, old_mem_range].clone(), (k, v))

        q, old_mem_k, old_mem_v, cmem_k, cmem_v = map(torch.detach, (q, old_mem_k, old_mem_v, cmem_k, cmem_v))

        attn_fn = partial(full_attn, dropout_fn=self.reconstruction_attn_dropout)
        aux_loss = F.mse_loss(attn_fn(q, old_mem_k, old_mem_v), attn_fn(q, cmem_k, cmem_v))
        return logits, Memory(new_mem, new_cmem), aux_loss


class CompressiveTransformer(nn.Module):
    def __init__(self, num_tokens, dim, seq_len, depth, mem_len, cmem_len, reconstruction_loss_weight=1.0):
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.layers = nn.ModuleList([SelfAttention(dim, seq_len, mem_len, cmem_len) for _ in range(depth)])
        self.to_logits = nn.Linear(dim, num_tokens)
        self.reconstruction_loss_weight = reconstruction_loss_weight

    def forward(self, x, memories=None):
        x = self.token_emb(x)
        b, t, d = x.shape
        if memories is None:
            memories = [Memory(torch.empty(b, 0, d), torch.empty(b, 0, d)) for _ in self.layers]
        next_memories, aux_loss = [], torch.tensor(0.0, requires_grad=True)
        for attn, mems in zip(self.layers, memories):
            out, new_mems, layer_aux_loss = attn(x, mems)
            x = x + out
            next_memories.append(Memory(*map(torch.detach, new_mems)))
            aux_loss = aux_loss + layer_aux_loss
        aux_loss = aux_loss * self.reconstruction_loss_weight / len(self.layers)
        return self.to_logits(x), next_memories, aux_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    model = CompressiveTransformer(num_tokens=20, dim=8, seq_len=8, depth=2, mem_len=8, cmem_len=4)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    seq = torch.randint(0, 20, (2, 33))
    memories = None
    for segment in range(3):
        inp, target = seq[:, segment * 8:(segment + 1) * 8], seq[:, segment * 8 + 1:(segment + 1) * 8 + 1]
        logits, memories, aux_loss = model(inp, memories)
        loss = F.cross_entropy(logits.transpose(1, 2), target)
        optimizer.zero_grad()
        (loss + aux_loss).backward()
        optimizer.step()
    assert aux_loss.item() > 0
    assert all(layer.compress_mem_fn.conv.weight.grad is None for layer in model.layers)
    print("evidence holds: aux_loss is built only from detached tensors, so the memory compression net never trains")
