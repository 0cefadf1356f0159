# source: https://github.com/huggingface/accelerate/blob/main/examples/nlp_example.py
# category: DL301
# expect: clean
# evidence: after model.eval() each evaluation step wraps only the forward in `with torch.no_grad()` inside the loop: eval logits carry no graph, and the train loop before it updates the weights
from dataclasses import dataclass

import torch
from torch import nn
import torch.nn.functional as F


@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor
    logits: torch.Tensor


class TinyBertForSequenceClassification(nn.Module):
    def __init__(self, vocab_size=30, hidden=16, num_labels=2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden)
        self.encoder = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, attention_mask, labels=None):
        h = torch.tanh(self.encoder(self.embeddings(input_ids)))
        pooled = (h * attention_mask.unsqueeze(-1)).sum(1) / attention_mask.sum(1, keepdim=True)
        logits = self.classifier(pooled)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


class Accelerator:
    """Single-process stand-in for accelerate.Accelerator."""

    device = torch.device("cpu")

    def prepare(self, *objects):
        return objects

    def backward(self, loss):
        loss.backward()

    def gather_for_metrics(self, tensors):
        return tensors

    def print(self, *args):
        print(*args)


class GlueMetric:
    def __init__(self):
        self.correct, self.total = 0, 0

    def add_batch(self, predictions, references):
        self.correct += int((predictions == references).sum())
        self.total += len(references)

    def compute(self):
        return {"accuracy": self.correct / self.total}


def training_function(config, model, train_dataloader, eval_dataloader):
    accelerator = Accelerator()
    lr = config["lr"]
    num_epochs = int(config["num_epochs"])
    gradient_accumulation_steps = 1
    optimizer = torch.optim.AdamW(params=model.parameters(), lr=lr)
    lr_scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=0.1,
                                                     total_iters=len(train_dataloader) * num_epochs)
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )
    last_logits = None
    for epoch in range(num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss
            loss = loss / gradient_accumulation_steps
            accelerator.backward(loss)
            if step % gradient_accumulation_steps == 0:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

        model.eval()
        metric = GlueMetric()
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
            metric.add_batch(predictions=predictions, references=references)
            last_logits = outputs.logits

        eval_metric = metric.compute()
        accelerator.print(f"epoch {epoch}:", eval_metric)
    return last_logits


def make_batches(n, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        input_ids = torch.randint(0, 30, (8, 6), generator=g)
        labels = (input_ids[:, 0] < 15).long()
        batches.append({"input_ids": input_ids, "attention_mask": torch.ones(8, 6), "labels": labels})
    return batches


if __name__ == "__main__":
    torch.manual_seed(42)
    config = {"lr": 2e-2, "num_epochs": 3, "seed": 42, "batch_size": 8}
    model = TinyBertForSequenceClassification()
    before = [p.detach().clone() for p in model.parameters()]
    last_logits = training_function(config, model, make_batches(6, 1), make_batches(3, 2))
    assert last_logits.grad_fn is None and not last_logits.requires_grad
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: eval logits carry no graph; the train loop updated every weight")
