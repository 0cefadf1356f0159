# source: https://github.com/huggingface/transformers/blob/main/examples/pytorch/language-modeling/run_clm_no_trainer.py
# category: DL401
# expect: clean
# evidence: total_loss adds loss.detach().float() and the evaluation list collects losses computed under torch.no_grad(), so neither keeps a graph, while the accumulated training steps change the weights
import math
from contextlib import contextmanager
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1):
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.step = 0
        self.sync_gradients = True
        self.logs = []

    @contextmanager
    def accumulate(self, model):
        self.step += 1
        self.sync_gradients = self.step % self.gradient_accumulation_steps == 0
        yield

    def backward(self, loss):
        (loss / self.gradient_accumulation_steps).backward()

    def gather_for_metrics(self, tensor):
        return tensor

    def log(self, values, step=None):
        self.logs.append((step, values))


class TinyCausalLM(nn.Module):
    def __init__(self, vocab=24, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lm_head = nn.Linear(hidden, vocab)

    def forward(self, input_ids, labels=None):
        logits = self.lm_head(torch.tanh(self.embed(input_ids)))
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten()) if labels is not None else None
        return SimpleNamespace(loss=loss, logits=logits)


def main(args, model, train_dataloader, eval_dataloader):
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    completed_steps = 0

    for epoch in range(args.num_train_epochs):
        model.train()
        if args.with_tracking:
            total_loss = 0
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                # We keep track of the loss at each epoch
                if args.with_tracking:
                    total_loss += loss.detach().float()
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
            if accelerator.sync_gradients:
                completed_steps += 1

        model.eval()
        losses = []
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)
            loss = outputs.loss
            losses.append(accelerator.gather_for_metrics(loss.repeat(args.per_device_eval_batch_size)))
        losses = torch.cat(losses)
        try:
            eval_loss = torch.mean(losses)
            perplexity = math.exp(eval_loss)
        except OverflowError:
            perplexity = float("inf")

        if args.with_tracking:
            accelerator.log({"perplexity": perplexity, "eval_loss": eval_loss,
                             "train_loss": total_loss.item() / len(train_dataloader),
                             "epoch": epoch, "step": completed_steps}, step=completed_steps)
    return accelerator, total_loss, losses


def make_loader(n, bsz=2):
    out = []
    for _ in range(n):
        ids = torch.randint(0, 24, (bsz, 6))
        out.append({"input_ids": ids, "labels": ids.clone()})
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    args = SimpleNamespace(learning_rate=5e-3, num_train_epochs=2, with_tracking=True,
                           gradient_accumulation_steps=2, per_device_eval_batch_size=2)
    model = TinyCausalLM()
    w0 = model.lm_head.weight.detach().clone()
    accelerator, total_loss, losses = main(args, model, make_loader(6), make_loader(2))

    assert not total_loss.requires_grad and not losses.requires_grad
    assert len(accelerator.logs) == 2 and isinstance(accelerator.logs[-1][1]["train_loss"], float)
    assert not torch.equal(w0, model.lm_head.weight.detach())
    print("evidence holds: the tracked and evaluation losses hold no graph; the accumulated steps train the model")
