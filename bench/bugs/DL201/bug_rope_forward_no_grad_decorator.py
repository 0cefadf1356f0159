# source: https://github.com/pico-lm/pico-train/pull/27
# category: DL201
# expect: flag 69, 108
# evidence: after Trainer._training_loop runs, every q_proj and k_proj weight has grad None and is unchanged while v_proj/o_proj/swiglu weights get gradients and move, because RoPE.forward runs under @torch.no_grad().
"""
Pico model (src/model/pico.py) and the training loop of src/training/trainer.py,
with Lightning Fabric and the HF wrapper left out.
"""
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelConfig:
    d_model: int = 16
    n_layers: int = 2
    vocab_size: int = 32
    max_seq_len: int = 8
    attention_n_heads: int = 4
    attention_n_kv_heads: int = 2
    activation_hidden_dim: int = 32
    norm_eps: float = 1e-6
    position_emb_theta: float = 10000.0
    batch_size: int = 4


class RMSNorm(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.eps = config.norm_eps
        self.weight = nn.Parameter(torch.ones(config.d_model))

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class RoPE(nn.Module):
    _freqs_cis: torch.Tensor = None

    def __init__(self, config, fabric=None):
        super().__init__()
        self.fabric = fabric
        self.theta = config.position_emb_theta
        self.dim = config.d_model // config.attention_n_heads
        if RoPE._freqs_cis is None:
            RoPE._freqs_cis = self._setup_freqs_cis(config.max_seq_len, self.theta, self.dim)

    @classmethod
    def _setup_freqs_cis(cls, seq_len: int, theta: float, dim: int) -> torch.Tensor:
        _freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        positions = torch.arange(seq_len)
        freqs = torch.outer(positions, _freqs)
        return torch.polar(torch.ones_like(freqs), freqs)  # complex64

    def get_freqs_cis(self, input_shape: torch.Size, start_pos: int, end_pos: int) -> torch.Tensor:
        _freqs_cis = RoPE._freqs_cis[start_pos:end_pos]
        ndim = len(input_shape)
        shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(input_shape)]
        return _freqs_cis.view(*shape)

    @torch.no_grad()
    def forward(self, queries: torch.Tensor, keys: torch.Tensor,
                start_pos: Optional[int] = 0) -> Tuple[torch.Tensor, torch.Tensor]:
        queries_ = torch.view_as_complex(queries.float().reshape(*queries.shape[:-1], -1, 2))
        keys_ = torch.view_as_complex(keys.float().reshape(*keys.shape[:-1], -1, 2))
        input_shape = queries_.shape  # (batch_size, seq_len, n_heads, head_dim/2)
        freqs_start_pos = start_pos
        freqs_end_pos = freqs_start_pos + queries_.shape[1]
        freqs_cis = self.get_freqs_cis(input_shape, freqs_start_pos, freqs_end_pos)
        freqs_cis = freqs_cis.to(queries.device)
        queries_rotated = torch.view_as_real(queries_ * freqs_cis).flatten(3)
        keys_rotated = torch.view_as_real(keys_ * freqs_cis).flatten(3)
        return queries_rotated.type_as(queries), keys_rotated.type_as(keys)


class Attention(nn.Module):
    def __init__(self, config, fabric=None):
        super().__init__()
        self.fabric = fabric
        self.n_heads = config.attention_n_heads
        self.n_kv_heads = config.attention_n_kv_heads
        d_model = config.d_model
        self.head_dim = d_model // self.n_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.q_proj = nn.Linear(d_model, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, self.n_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, d_model, bias=False)
        self.rope = RoPE(config, fabric)

    def forward(self, input, mask=None, past_key_values=None, use_cache=False):
        bsz, seq_len, _ = input.shape
        _queries, _keys, _values = (self.q_proj(input), self.k_proj(input), self.v_proj(input))
        queries = _queries.view(bsz, seq_len, self.n_heads, self.head_dim)
        keys = _keys.view(bsz, seq_len, self.n_kv_heads, self.head_dim)
        values = _values.view(bsz, seq_len, self.n_kv_heads, self.head_dim)
        start_pos = past_key_values[0].shape[1] if past_key_values is not None else 0

        # apply rotary positional embeddings
        queries, keys = self.rope(queries, keys, start_pos)

        cached_keys, cached_values = (keys, values) if use_cache else (None, None)
        queries = queries.transpose(1, 2)
        keys = keys.transpose(1, 2)
        values = values.transpose(1, 2)
        attn_output = F.scaled_dot_product_attention(
            queries.contiguous(), keys.contiguous(), values.contiguous(), attn_mask=mask,
            enable_gqa=True if self.n_rep > 1 else False)
        attn_output = attn_output.transpose(1, 2).contiguous().view(bsz, seq_len, -1)
        output = self.o_proj(attn_output)
        return output, (cached_keys, cached_values)


class SwiGLU(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.w_0 = nn.Linear(config.d_model, config.activation_hidden_dim, bias=False)
        self.w_1 = nn.Linear(config.d_model, config.activation_hidden_dim, bias=False)
        self.w_2 = nn.Linear(config.activation_hidden_dim, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(F.silu(self.w_0(x)) * self.w_1(x))


class PicoBlock(nn.Module):
    def __init__(self, config, fabric=None):
        super().__init__()
        self.attention = Attention(config, fabric)
        self.swiglu = SwiGLU(config)
        self.attention_norm = RMSNorm(config)
        self.swiglu_norm = RMSNorm(config)

    def forward(self, input, mask=None, past_key_values=None, use_cache=False):
        attention_output, cached_key_values = self.attention(
            self.attention_norm(input), mask=mask, past_key_values=past_key_values, use_cache=use_cache)
        h = input + attention_output
        out = h + self.swiglu(self.swiglu_norm(h))
        return out, cached_key_values


class Pico(nn.Module):
    def __init__(self, model_config, fabric=None):
        super().__init__()
        self.config = model_config
        self.fabric = fabric
        self.embedding_proj = nn.Embedding(self.config.vocab_size, self.config.d_model)
        self.layers = nn.ModuleList([PicoBlock(self.config, self.fabric) for _ in range(self.config.n_layers)])
        self.output_norm = RMSNorm(self.config)
        self.de_embedding_proj = nn.Linear(self.config.d_model, self.config.vocab_size, bias=False)

    def forward(self, input_ids, past_key_values=None, use_cache=False):
        seq_len = input_ids.shape[-1]
        h = self.embedding_proj(input_ids)
        mask = None
        if seq_len > 1:
            mask = torch.full((seq_len, seq_len), float("-inf"), device=h.device)
            mask = torch.triu(mask, diagonal=1)
        cached_key_values = () if use_cache else None
        for idx, layer in enumerate(self.layers):
            h, layer_cached_key_values = layer(h, mask=mask, past_key_values=None, use_cache=use_cache)
            if use_cache:
                cached_key_values += (layer_cached_key_values,)
        h = self.output_norm(h)
        logits = self.de_embedding_proj(h).float()
        return logits, cached_key_values


class Trainer:
    def __init__(self, model_config, train_iterator, gradient_accumulation_steps=2, max_steps=3):
        self.model = Pico(model_config)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: 1.0)
        self.train_iterator = train_iterator
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.max_steps = max_steps
        self.initial_batch_step = 0

    def _training_loop(self) -> int:
        batch_step = self.initial_batch_step
        interval_loss = torch.tensor(0.0)
        initial_sub_batch_step = batch_step * self.gradient_accumulation_steps
        for sub_batch_step, sub_batch in enumerate(self.train_iterator, start=initial_sub_batch_step):
            _input_ids = torch.tensor(sub_batch["input_ids"])
            input_ids = _input_ids[:, :-1]
            labels = _input_ids[:, 1:]
            model_output, _ = self.model(input_ids)
            model_output = model_output.transpose(1, 2)
            should_accumulate_gradients = (sub_batch_step + 1) % self.gradient_accumulation_steps != 0
            loss = F.cross_entropy(model_output, labels)
            (loss / self.gradient_accumulation_steps).backward()
            interval_loss += loss.item()
            if should_accumulate_gradients:
                continue
            self.last_grads = {n: p.grad for n, p in self.model.named_parameters()}
            self.optimizer.step()
            self.optimizer.zero_grad()
            self.lr_scheduler.step()
            batch_step += 1
            if batch_step >= self.max_steps:
                break
        return batch_step


if __name__ == "__main__":
    torch.manual_seed(0)
    config = ModelConfig()
    train_iterator = [{"input_ids": torch.randint(0, config.vocab_size, (4, config.max_seq_len + 1)).tolist()}
                      for _ in range(6)]
    trainer = Trainer(config, train_iterator)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    final_step = trainer._training_loop()
    assert final_step == 3
    for name, p in trainer.model.named_parameters():
        moved = not torch.equal(before[name], p.detach())
        if ".q_proj." in name or ".k_proj." in name:
            assert trainer.last_grads[name] is None, name
            assert not moved, name
        elif ".v_proj." in name or ".o_proj." in name or ".swiglu." in name:
            assert trainer.last_grads[name] is not None, name
            assert moved, name
    print("evidence holds: q_proj/k_proj never receive a gradient nor change; v_proj/o_proj/swiglu train")
