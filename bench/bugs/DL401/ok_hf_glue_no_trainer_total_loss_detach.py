# source: https://github.com/huggingface/transformers/blob/main/examples/pytorch/text-classification/run_glue_no_trainer.py
# category: DL401
# expect: clean
# evidence: the epoch's total_loss adds loss.detach().float(), so it stays a graph-free tensor while the scaled loss is backpropagated with gradient accumulation and the weights change
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class Accelerator:
    def __init__(self):
        self.logs = []

    def backward(self, loss):
        loss.backward()

    def gather(self, tensors):
        return tensors

    def log(self, values, step=None):
        self.logs.append((step, values))


class Accuracy:
    def __init__(self):
        self.preds, self.refs = [], []

    def add_batch(self, predictions, references):
        self.preds.append(predictions)
        self.refs.append(references)

    def compute(self):
        p, r = torch.cat(self.preds), torch.cat(self.refs)
        return {"accuracy": (p == r).float().mean().item()}


class TinySequenceClassifier(nn.Module):
    def __init__(self, vocab=30, hidden=16, num_labels=2):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, labels=None):
        logits = self.classifier(torch.tanh(self.embed(input_ids)))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SimpleNamespace(loss=loss, logits=logits)


def main(args, model, train_dataloader, eval_dataloader):
    accelerator = Accelerator()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    metric = Accuracy()
    completed_steps = 0
    is_regression = False

    for epoch in range(args.num_train_epochs):
        model.train()
        if args.with_tracking:
            total_loss = 0
        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss
            # We keep track of the loss at each epoch
            if args.with_tracking:
                total_loss += loss.detach().float()
            loss = loss / args.gradient_accumulation_steps
            accelerator.backward(loss)
            if step % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
                completed_steps += 1

        model.eval()
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1) if not is_regression else outputs.logits.squeeze()
            predictions, references = accelerator.gather((predictions, batch["labels"]))
            metric.add_batch(predictions=predictions, references=references)
        eval_metric = metric.compute()

        if args.with_tracking:
            accelerator.log(
                {"accuracy": eval_metric["accuracy"], "train_loss": total_loss.item() / len(train_dataloader),
                 "epoch": epoch, "step": completed_steps},
                step=completed_steps,
            )
    return accelerator, total_loss


def make_loader(n, bsz=4):
    return [{"input_ids": torch.randint(0, 30, (bsz, 5)), "labels": torch.randint(0, 2, (bsz,))} for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    args = SimpleNamespace(learning_rate=5e-3, num_train_epochs=2, with_tracking=True, gradient_accumulation_steps=2)
    model = TinySequenceClassifier()
    w0 = model.classifier.weight.detach().clone()
    accelerator, total_loss = main(args, model, make_loader(6), make_loader(2))

    assert total_loss.grad_fn is None and not total_loss.requires_grad
    assert len(accelerator.logs) == 2 and isinstance(accelerator.logs[-1][1]["train_loss"], float)
    assert not torch.equal(w0, model.classifier.weight.detach())
    print("evidence holds: total_loss accumulates detached values; the accumulated-gradient steps train the model")
