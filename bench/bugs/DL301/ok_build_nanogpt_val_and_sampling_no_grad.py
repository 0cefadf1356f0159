# source: https://github.com/karpathy/build-nanogpt/blob/master/train_gpt2.py
# category: DL301
# expect: clean
# evidence: in the training loop, the validation loop runs inside `with torch.no_grad()` and the sampling while-loop wraps each forward in it, both after model.eval(); the later model.train() steps still learn
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class GPT(nn.Module):
    def __init__(self, vocab_size=16, block_size=32, n_embd=32):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.mlp(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


class DataLoaderLite:
    def __init__(self, B, T, tokens):
        self.B, self.T, self.tokens = B, T, tokens
        self.reset()

    def reset(self):
        self.current_position = 0

    def next_batch(self):
        B, T = self.B, self.T
        buf = self.tokens[self.current_position: self.current_position + B * T + 1]
        x = buf[:-1].view(B, T)
        y = buf[1:].view(B, T)
        self.current_position += B * T
        if self.current_position + (B * T + 1) > len(self.tokens):
            self.current_position = 0
        return x, y


def train(model, train_loader, val_loader, max_steps=20, grad_accum_steps=2, eval_every=10,
          max_lr=6e-3, min_lr=6e-4, warmup_steps=4):
    device = "cpu"
    optimizer = torch.optim.AdamW(model.parameters(), lr=max_lr, betas=(0.9, 0.95), eps=1e-8)

    def get_lr(it):
        if it < warmup_steps:
            return max_lr * (it + 1) / warmup_steps
        decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (max_lr - min_lr)

    val_history, samples = [], []
    for step in range(max_steps):
        last_step = (step == max_steps - 1)

        # once in a while evaluate our validation loss
        if step % eval_every == 0 or last_step:
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss_accum = 0.0
                val_loss_steps = 4
                for _ in range(val_loss_steps):
                    x, y = val_loader.next_batch()
                    x, y = x.to(device), y.to(device)
                    logits, loss = model(x, y)
                    loss = loss / val_loss_steps
                    val_loss_accum += loss.detach()
            val_history.append(val_loss_accum.item())
            print(f"validation loss: {val_loss_accum.item():.4f}")

        # once in a while generate from the model (except step 0, which is noise)
        if (step > 0 and step % eval_every == 0) or last_step:
            model.eval()
            num_return_sequences = 2
            max_length = 12
            tokens = torch.tensor([1, 2, 3, 4], dtype=torch.long)
            xgen = tokens.unsqueeze(0).repeat(num_return_sequences, 1).to(device)
            sample_rng = torch.Generator(device=device)
            sample_rng.manual_seed(42)
            while xgen.size(1) < max_length:
                # forward the model to get the logits
                with torch.no_grad():
                    logits, loss = model(xgen)  # (B, T, vocab_size)
                    logits = logits[:, -1, :]  # (B, vocab_size)
                    probs = F.softmax(logits, dim=-1)
                    topk_probs, topk_indices = torch.topk(probs, 8, dim=-1)
                    ix = torch.multinomial(topk_probs, 1, generator=sample_rng)  # (B, 1)
                    xcol = torch.gather(topk_indices, -1, ix)  # (B, 1)
                    xgen = torch.cat((xgen, xcol), dim=1)
            samples.append(xgen)

        # do one step of the optimization
        model.train()
        optimizer.zero_grad()
        loss_accum = 0.0
        for micro_step in range(grad_accum_steps):
            x, y = train_loader.next_batch()
            x, y = x.to(device), y.to(device)
            logits, loss = model(x, y)
            loss = loss / grad_accum_steps
            loss_accum += loss.detach()
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        optimizer.step()
        print(f"step {step:4d} | loss: {loss_accum.item():.6f} | lr {lr:.4e} | norm: {norm:.4f}")
    return val_history, samples


if __name__ == "__main__":
    torch.manual_seed(1337)
    tokens = torch.arange(2000) % 16
    model = GPT()
    modes = []
    model.register_forward_hook(lambda m, i, o: modes.append((m.training, torch.is_grad_enabled())))
    val_history, samples = train(model, DataLoaderLite(4, 16, tokens), DataLoaderLite(4, 16, tokens[7:]))
    assert all(not grad for training, grad in modes if not training)
    assert all(grad for training, grad in modes if training)
    assert all(not s.requires_grad for s in samples) and len(samples) == 2
    assert val_history[-1] < val_history[0]
    print("evidence holds: every eval-mode forward ran with grad off; val loss %.3f -> %.3f"
          % (val_history[0], val_history[-1]))
