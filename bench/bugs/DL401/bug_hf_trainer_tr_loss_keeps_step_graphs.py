# source: https://github.com/huggingface/transformers/pull/6999
# category: DL401
# expect: flag 76
# evidence: Trainer.train() adds the non-detached loss returned by training_step() into tr_loss, so tr_loss becomes a graph whose AddBackward chain grows by one node (plus that step's loss graph) at every step.
from collections import namedtuple

import torch
from torch import nn

TrainOutput = namedtuple("TrainOutput", ["global_step", "training_loss"])


class TrainingArguments:
    def __init__(self, num_train_epochs=2, gradient_accumulation_steps=1, learning_rate=5e-3,
                 max_grad_norm=1.0, logging_steps=2, device="cpu"):
        self.num_train_epochs = num_train_epochs
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.learning_rate = learning_rate
        self.max_grad_norm = max_grad_norm
        self.logging_steps = logging_steps
        self.device = torch.device(device)


class TinyForSequenceClassification(nn.Module):
    def __init__(self, vocab_size=50, hidden=16, num_labels=2):
        super().__init__()
        self.embeddings = nn.EmbeddingBag(vocab_size, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids=None, labels=None):
        logits = self.classifier(self.embeddings(input_ids))
        loss = nn.functional.cross_entropy(logits, labels)
        return (loss, logits)


class Trainer:
    def __init__(self, model, args, train_dataset):
        self.model = model
        self.args = args
        self.train_dataset = train_dataset
        self.global_step = None
        self.log_history = []

    def get_train_dataloader(self):
        return self.train_dataset

    def create_optimizer_and_scheduler(self, num_training_steps):
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.args.learning_rate)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: max(0.0, 1.0 - step / num_training_steps))

    def _prepare_inputs(self, inputs):
        return {k: v.to(self.args.device) for k, v in inputs.items()}

    def training_step(self, model, inputs):
        model.train()
        inputs = self._prepare_inputs(inputs)
        outputs = model(**inputs)
        loss = outputs[0]
        if self.args.gradient_accumulation_steps > 1:
            loss = loss / self.args.gradient_accumulation_steps
        loss.backward()
        return loss

    def train(self):
        train_dataloader = self.get_train_dataloader()
        t_total = len(train_dataloader) // self.args.gradient_accumulation_steps * self.args.num_train_epochs
        self.create_optimizer_and_scheduler(num_training_steps=t_total)
        model = self.model
        self.global_step = 0
        tr_loss = torch.tensor(0.0).to(self.args.device)
        logging_loss_scalar = 0.0
        model.zero_grad()
        for epoch in range(self.args.num_train_epochs):
            for step, inputs in enumerate(train_dataloader):
                tr_loss += self.training_step(model, inputs)

                if (step + 1) % self.args.gradient_accumulation_steps == 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), self.args.max_grad_norm)
                    self.optimizer.step()
                    self.lr_scheduler.step()
                    model.zero_grad()
                    self.global_step += 1
                    if self.global_step % self.args.logging_steps == 0:
                        tr_loss_scalar = tr_loss.item()
                        logs = {"loss": (tr_loss_scalar - logging_loss_scalar) / self.args.logging_steps}
                        logging_loss_scalar = tr_loss_scalar
                        self.log_history.append(logs)
        self.tr_loss = tr_loss
        return TrainOutput(self.global_step, tr_loss.item() / self.global_step)


if __name__ == "__main__":
    torch.manual_seed(0)
    dataset = [{"input_ids": torch.randint(0, 50, (4, 6)), "labels": torch.randint(0, 2, (4,))}
               for _ in range(5)]
    args = TrainingArguments(num_train_epochs=2)
    trainer = Trainer(TinyForSequenceClassification(), args, dataset)
    out = trainer.train()

    tr_loss = trainer.tr_loss
    assert tr_loss.requires_grad and tr_loss.grad_fn is not None
    chain, node = 0, tr_loss.grad_fn
    while node is not None and type(node).__name__.startswith("AddBackward"):
        chain += 1
        node = node.next_functions[0][0]
    assert chain == out.global_step == 10, (chain, out.global_step)
    print("evidence holds: after %d steps tr_loss has grad_fn=%s and an AddBackward chain of %d nodes, "
          "one retained loss graph per step" % (out.global_step, type(tr_loss.grad_fn).__name__, chain))
