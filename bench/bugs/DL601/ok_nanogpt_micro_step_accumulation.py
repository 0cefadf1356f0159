# source: https://github.com/karpathy/nanoGPT/blob/master/train.py
# category: DL601
# expect: clean
# evidence: each optimizer step applies exactly the sum of its own micro-steps' gradients; zero_grad(set_to_none=True) after the step resets them for the next iteration
import math
from contextlib import nullcontext

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.optim.optimizer import register_optimizer_step_pre_hook

# -----------------------------------------------------------------------------
block_size = 8
vocab_size = 16
batch_size = 4
gradient_accumulation_steps = 3
max_iters = 4
eval_interval = 2
eval_iters = 2
learning_rate = 6e-4
warmup_iters = 2
lr_decay_iters = 4
min_lr = 6e-5
grad_clip = 0.0  # disable clipping so the evidence can compare raw sums
dtype = 'float32'
# -----------------------------------------------------------------------------

ctx = nullcontext()
train_data = torch.randint(0, vocab_size, (512,))
val_data = torch.randint(0, vocab_size, (128,))


def get_batch(split):
    data = train_data if split == 'train' else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x, y


class GPT(nn.Module):
    def __init__(self, n_embd=16):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.Sequential(nn.LayerNorm(n_embd), nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.h(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


@torch.no_grad()
def estimate_loss(model):
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def train(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95))
    scaler = torch.amp.GradScaler('cpu', enabled=(dtype == 'float16'))
    X, Y = get_batch('train')
    iter_num = 0
    while True:
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        if iter_num % eval_interval == 0:
            losses = estimate_loss(model)
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        for micro_step in range(gradient_accumulation_steps):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / gradient_accumulation_steps
            X, Y = get_batch('train')
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        if iter_num > max_iters:
            break


if __name__ == "__main__":
    torch.manual_seed(0)
    model = GPT()
    w = model.lm_head.weight
    fresh, seen = [], []
    w.register_hook(lambda g: fresh.append(g.detach().clone()))
    handle = register_optimizer_step_pre_hook(lambda opt, a, kw: seen.append(w.grad.detach().clone()))
    before = w.detach().clone()
    train(model)
    handle.remove()

    k = gradient_accumulation_steps
    assert len(seen) == max_iters + 1 and len(fresh) == k * len(seen)
    for i, g in enumerate(seen):
        assert torch.allclose(g, torch.stack(fresh[i * k:(i + 1) * k]).sum(0), atol=1e-6)
    assert w.grad is None  # set_to_none after the last step
    assert not torch.equal(before, w)
    print("evidence holds: every step uses only its own micro-steps' gradients; gradients are reset after each step")
