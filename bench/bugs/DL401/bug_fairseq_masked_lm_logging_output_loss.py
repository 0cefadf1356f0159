# source: https://github.com/facebookresearch/fairseq/issues/2255
# category: DL401
# expect: flag 25, 76
# evidence: the criterion puts the live loss tensor into logging_output; reduce_metrics feeds it to a running AverageMeter, whose sum becomes a growing autograd graph (one AddBackward node per update) kept for the whole run.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class AverageMeter(object):
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = None
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        if val is not None:
            self.val = val
            if n > 0:
                self.sum = self.sum + (val * n)
                self.count += n

    @property
    def avg(self):
        return self.sum / self.count if self.count > 0 else self.val


METERS = {}


def log_scalar(key, value, weight=1, round=None):
    if key not in METERS:
        METERS[key] = AverageMeter()
    METERS[key].update(value, weight)


class TinyRobertaLM(nn.Module):
    def __init__(self, vocab=30, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, src_tokens, masked_tokens=None):
        x = self.embed(src_tokens)
        if masked_tokens is not None:
            x = x[masked_tokens, :]
        return (self.lm_head(x), None)

    def get_targets(self, sample, net_output):
        return sample["target"]


class MaskedLmLoss(nn.Module):
    def __init__(self, padding_idx=1):
        super().__init__()
        self.padding_idx = padding_idx

    def forward(self, model, sample, reduce=True):
        masked_tokens = sample["target"].ne(self.padding_idx)
        sample_size = masked_tokens.int().sum().item()
        logits = model(**sample["net_input"], masked_tokens=masked_tokens)[0]
        targets = model.get_targets(sample, [logits])
        targets = targets[masked_tokens]
        loss = F.nll_loss(
            F.log_softmax(logits.view(-1, logits.size(-1)), dim=-1, dtype=torch.float32),
            targets.view(-1),
            reduction="sum",
            ignore_index=self.padding_idx,
        )
        logging_output = {
            "loss": loss,
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": sample_size,
        }
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs):
        loss_sum = sum(log.get("loss", 0) for log in logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        log_scalar("loss", loss_sum / sample_size / math.log(2), sample_size, round=3)


class Trainer(object):
    def __init__(self, model, criterion, lr=0.1):
        self.model = model
        self.criterion = criterion
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def train_step(self, samples):
        self.model.train()
        self.optimizer.zero_grad()
        logging_outputs, sample_size = [], 0
        for sample in samples:
            loss, sample_size_i, logging_output = self.criterion(self.model, sample)
            loss.backward()
            logging_outputs.append(logging_output)
            sample_size += sample_size_i
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.div_(sample_size)
        self.optimizer.step()
        self.criterion.reduce_metrics(logging_outputs)
        return logging_outputs


def make_sample(bsz=4, tlen=7, vocab=30, pad=1):
    src = torch.randint(2, vocab, (bsz, tlen))
    target = torch.full_like(src, pad)
    mask = torch.rand(bsz, tlen) < 0.3
    mask[:, 0] = True
    target[mask] = src[mask]
    return {"net_input": {"src_tokens": src}, "target": target, "ntokens": int(mask.sum()), "nsentences": bsz}


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer(TinyRobertaLM(), MaskedLmLoss())
    num_updates = 6
    for _ in range(num_updates):
        trainer.train_step([make_sample(), make_sample()])

    meter = METERS["loss"]
    assert torch.is_tensor(meter.sum) and meter.sum.requires_grad and meter.sum.grad_fn is not None
    chain, node = 0, meter.sum.grad_fn
    while node is not None and type(node).__name__.startswith("AddBackward"):
        chain += 1
        node = node.next_functions[0][0]
    assert chain >= num_updates - 1, chain
    print("evidence holds: the loss meter's running sum is a graph (grad_fn=%s) chaining %d updates, "
          "each holding that step's loss graph" % (type(meter.sum.grad_fn).__name__, chain))
