# source: https://github.com/huggingface/transformers/blob/main/examples/pytorch/text-classification/run_glue_no_trainer.py
# category: DL601
# expect: clean
# evidence: gradients are deliberately accumulated and zeroed right after every optimizer step, so each step applies the sum of its own window of micro-batches only
import argparse
import math
from types import SimpleNamespace

import torch
import torch.nn as nn
from torch.optim.lr_scheduler import LambdaLR
from torch.optim.optimizer import register_optimizer_step_pre_hook


class TinySequenceClassifier(nn.Module):
    def __init__(self, vocab_size=30, hidden=16, num_labels=2):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, labels=None):
        logits = self.classifier(self.embed(input_ids))
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return SimpleNamespace(loss=loss, logits=logits)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda)


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Finetune a text classification model")
    parser.add_argument("--learning_rate", type=float, default=5e-3)
    parser.add_argument("--num_train_epochs", type=int, default=2)
    parser.add_argument("--max_train_steps", type=int, default=None)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=3)
    parser.add_argument("--num_warmup_steps", type=int, default=0)
    return parser.parse_args(argv)


def main(args, train_dataloader, eval_dataloader):
    model = TinySequenceClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer=optimizer,
        num_warmup_steps=args.num_warmup_steps,
        num_training_steps=args.max_train_steps,
    )

    completed_steps = 0
    for epoch in range(args.num_train_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss
            loss = loss / args.gradient_accumulation_steps
            loss.backward()
            if step % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
                completed_steps += 1

            if completed_steps >= args.max_train_steps:
                break

        model.eval()
        correct = total = 0
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            correct += (predictions == batch["labels"]).sum().item()
            total += batch["labels"].numel()
        print(f"epoch {epoch}: accuracy {correct / total:.3f}")
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    args = parse_args([])
    batches = lambda n: [{"input_ids": torch.randint(0, 30, (4, 6)), "labels": torch.randint(0, 2, (4,))} for _ in range(n)]
    train_dataloader, eval_dataloader = batches(7), batches(2)

    fresh, seen, installed = [], [], []

    def pre_step(opt, a, kw):
        w = opt.param_groups[0]["params"][-1]  # classifier.bias
        seen.append((len(fresh) + (0 if installed else 1), w.grad.detach().clone()))
        if not installed:
            fresh.append(w.grad.detach().clone())
            installed.append(w.register_hook(lambda g: fresh.append(g.detach().clone())))

    handle = register_optimizer_step_pre_hook(pre_step)
    model = main(args, train_dataloader, eval_dataloader)
    handle.remove()

    # windows per epoch: step 0 alone, then steps 1-3, 4-6 (step % 3 == 0 or last step)
    windows = [(0, 1), (1, 4), (4, 7), (7, 8), (8, 11), (11, 14)]
    assert len(seen) == len(windows)
    for (end, g), (lo, hi) in zip(seen, windows):
        assert end == hi
        assert torch.allclose(g, torch.stack(fresh[lo:hi]).sum(0), atol=1e-6)
    print("evidence holds: each optimizer step applies only the micro-batches accumulated since the previous step")
