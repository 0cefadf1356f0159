# source: https://github.com/ray-project/ray/pull/40940
# category: DL401
# expect: flag 75
# evidence: loss_sum accumulates the loss tensors of every step, so at the end of the epoch it carries a grad_fn and the graph reachable from it grows with the number of steps
import math
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class Accelerator:
    """The parts of the accelerate API the training function uses, on one CPU process."""

    def backward(self, loss):
        loss.backward()

    def gather(self, tensor):
        return tensor

    def print(self, *args):
        pass


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size=32, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.lm_head = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids, labels=None, attention_mask=None):
        logits = self.lm_head(torch.tanh(self.proj(self.embed(input_ids))))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return SimpleNamespace(loss=loss, logits=logits)


def evaluate(*, model, eval_ds, accelerator, bsize, ds_kwargs, as_test=False):
    model.eval()
    losses = []
    for step, batch in enumerate(eval_ds):
        with torch.no_grad():
            outputs = model(**batch)
        loss = outputs.loss
        losses.append(accelerator.gather(loss[None]))
    losses = torch.cat(losses)
    try:
        eval_loss = torch.mean(losses)
        perplexity = math.exp(eval_loss)
    except OverflowError:
        perplexity = float("inf")
    return perplexity, eval_loss


def training_function(kwargs: dict):
    config = kwargs["config"]
    accelerator = Accelerator()
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    train_ds, valid_ds = kwargs["train_ds"], kwargs["valid_ds"]
    epoch_losses = []

    for epoch in range(config["num_epochs"]):
        s_epoch = time.time()
        model.train()
        loss_sum = torch.tensor(0.0)
        for step, batch in enumerate(train_ds):
            s_fwd = time.time()
            outputs = model(**batch)
            loss = outputs.loss
            loss_sum += loss
            e_fwd = time.time()
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            aggregated_loss = torch.mean(accelerator.gather(loss[None])).item()
            accelerator.print(f"[epoch {epoch} step {step}] loss: {aggregated_loss} fwd: {e_fwd - s_fwd:.3f}s")

        e_epoch = time.time()
        perplex, eval_loss = evaluate(model=model, eval_ds=valid_ds, accelerator=accelerator,
                                      bsize=config["eval_batch_size"], ds_kwargs={})
        epoch_losses.append(loss_sum)
        accelerator.print(f"epoch {epoch} time {e_epoch - s_epoch:.2f}s train loss {loss_sum.item() / (step + 1)} "
                          f"eval loss {eval_loss.item()} perplexity {perplex}")
    return epoch_losses


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def make_ds(n, bsz=2, seq=6):
    out = []
    for _ in range(n):
        ids = torch.randint(0, 32, (bsz, seq))
        out.append({"input_ids": ids, "labels": ids.clone()})
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    sizes = []
    for n_steps in (2, 4, 8):
        config = {"lr": 1e-3, "num_epochs": 1, "eval_batch_size": 2}
        losses = training_function({"config": config, "train_ds": make_ds(n_steps), "valid_ds": make_ds(1)})
        assert losses[0].grad_fn is not None
        sizes.append(graph_nodes(losses[0]))
    assert sizes[0] < sizes[1] < sizes[2], sizes
    print("evidence holds: loss_sum keeps each step's graph: %s nodes for 2/4/8 steps" % sizes)
