# source: https://github.com/caikit/caikit-nlp/pull/258
# category: DL401
# expect: flag 114
# evidence: step_loss_log[step_count] = loss keeps every step's loss tensor (with its grad_fn) alive until the end of the epoch; at epoch end all of them are still alive and attached to the graph.
import weakref
from contextlib import contextmanager
from datetime import datetime

import torch
import torch.nn as nn

ALIVE_AT_EPOCH_END = []
LOSS_REFS = []


class tqdm:
    def __init__(self, iterable, disable=False):
        self.iterable = iterable

    def set_description(self, desc):
        pass

    def __iter__(self):
        for item in self.iterable:
            yield item
        ALIVE_AT_EPOCH_END.append(
            [r() is not None and r().grad_fn is not None for r in LOSS_REFS]
        )
        LOSS_REFS.clear()


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1, device_placement=True, mixed_precision="no"):
        self.gradient_accumulation_steps = gradient_accumulation_steps

    def prepare(self, *objs):
        return objs

    @contextmanager
    def accumulate(self, model):
        yield

    def backward(self, loss):
        loss.backward()


class Output:
    def __init__(self, loss, logits):
        self.loss = loss
        self.logits = logits


class PromptTunedLM(nn.Module):
    def __init__(self, vocab=20, num_virtual_tokens=4, dim=16):
        super().__init__()
        self.prompt_embeddings = nn.Embedding(num_virtual_tokens, dim)
        self.word_embeddings = nn.Embedding(vocab, dim)
        self.word_embeddings.weight.requires_grad_(False)
        self.lm_head = nn.Linear(dim, vocab)
        self.lm_head.weight.requires_grad_(False)
        self.num_virtual_tokens = num_virtual_tokens

    def forward(self, input_ids, labels):
        prompts = self.prompt_embeddings.weight.unsqueeze(0).expand(input_ids.size(0), -1, -1)
        h = torch.cat([prompts, self.word_embeddings(input_ids)], dim=1).cumsum(dim=1)
        logits = self.lm_head(h[:, self.num_virtual_tokens:])
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        LOSS_REFS.append(weakref.ref(loss))
        return Output(loss, logits)


class PeftPromptTuning:
    @staticmethod
    def _execute_train_loop(model, optimizer, lr_scheduler, train_dataloader, device, num_epochs,
                            accumulate_steps=1, silence_progress_bars=True):
        training_loss_tracker = []
        mixed_precision = "no"

        accelerator = Accelerator(
            gradient_accumulation_steps=accumulate_steps,
            device_placement=True,
            mixed_precision=mixed_precision,
        )

        # Below would send all the data and model to
        # configured device and convert them to required dtypes
        model, optimizer, new_train_dataloader, lr_scheduler = accelerator.prepare(
            model,
            optimizer,
            train_dataloader,
            lr_scheduler,
        )

        step_count = 0
        for epoch in range(num_epochs):
            step_loss_log = {}
            model.train()
            total_loss = 0
            tqdm_loader = tqdm(new_train_dataloader, disable=silence_progress_bars)
            for batch in tqdm_loader:

                tqdm_loader.set_description("Epoch: {}".format(epoch))

                batch = {k: v.to(device) for k, v in batch.items()}
                try:
                    with accelerator.accumulate(model):
                        outputs = model(**batch)
                        loss = outputs.loss
                        total_loss += loss.detach().float()
                        accelerator.backward(loss)
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()
                        step_loss_log[step_count] = loss
                        step_count += 1
                except MemoryError:
                    raise MemoryError("Not enough memory available for training!")

            print("<NLP46114010I>", {"loss": float(loss), "epoch": epoch})

            for step, loss_val in step_loss_log.items():
                training_loss_tracker.append(
                    {
                        "epoch": epoch,
                        "step": step,
                        "value": float(loss_val),
                        "timestamp": datetime.isoformat(datetime.now()),
                    }
                )
        return {"loss": training_loss_tracker}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = PromptTunedLM()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    train_dataloader = [
        {"input_ids": torch.randint(0, 20, (2, 6)), "labels": torch.randint(0, 20, (2, 6))} for _ in range(5)
    ]

    result = PeftPromptTuning._execute_train_loop(model, optimizer, lr_scheduler, train_dataloader, "cpu", num_epochs=2)

    assert len(result["loss"]) == 10
    assert ALIVE_AT_EPOCH_END == [[True] * 5, [True] * 5]
    print("evidence holds: at the end of each epoch all 5 step losses are still alive with their grad_fn, held by step_loss_log")
