# source: https://github.com/gentaiscool/end2end-asr-pytorch/pull/41
# category: DL301
# expect: flag 69, 73, 76
# evidence: Trainer.train() trains, then calls model.eval() and loops over every validation loader with grad enabled: each validation prediction carries a grad_fn and autograd saves activations, the cause of the OOM at validation
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD_TOKEN = 0


class Transformer(nn.Module):
    """Speech encoder + character decoder (tiny stand-in)."""

    def __init__(self, feat_dim=8, vocab=6, dim=16):
        super().__init__()
        self.encoder = nn.GRU(feat_dim, dim, batch_first=True)
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, src, src_lengths, tgt, verbose=False):
        enc, _ = self.encoder(src)
        dec = self.embed(tgt[:, :-1]) + enc.mean(1, keepdim=True)
        pred = self.out(dec)
        gold = tgt[:, 1:]
        hyp_seq = pred.argmax(-1)
        return pred, gold, hyp_seq, gold


def calculate_metrics(pred, gold, smoothing=0.0):
    loss = F.cross_entropy(pred.reshape(-1, pred.size(-1)), gold.reshape(-1), ignore_index=PAD_TOKEN,
                           label_smoothing=smoothing)
    num_correct = pred.argmax(-1).eq(gold).masked_select(gold.ne(PAD_TOKEN)).sum().item()
    return loss, num_correct


class Trainer():
    """
    Trainer class
    """

    def __init__(self):
        logging.info("Trainer is initialized")

    def train(self, model, train_loader, valid_loader_list, opt, start_epoch, num_epochs, smoothing=0.1):
        history = []
        start_time = time.time()
        best_valid_loss = 1000000000

        for epoch in range(start_epoch, num_epochs):
            total_loss = 0
            model.train()
            for i, (data) in enumerate(train_loader):
                src, tgt, src_lengths = data
                opt.zero_grad()
                pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)
                loss, num_correct = calculate_metrics(pred, gold, smoothing=smoothing)
                loss.backward()
                opt.step()
                total_loss += loss.item()

            # evaluate
            logging.info("VALID")
            model.eval()

            for ind in range(len(valid_loader_list)):
                valid_loader = valid_loader_list[ind]

                total_valid_loss, total_valid_correct = 0, 0
                for i, (data) in enumerate(valid_loader):
                    src, tgt, src_lengths = data

                    pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)

                    loss, num_correct = calculate_metrics(pred, gold, smoothing=smoothing)
                    if loss.item() == float('Inf'):
                        logging.info("Found infinity loss, masking")
                        continue
                    total_valid_loss += loss.item()
                    total_valid_correct += num_correct
                logging.info("VALID SET {} LOSS:{:.4f}".format(ind, total_valid_loss / len(valid_loader)))

            metrics = {"train_loss": total_loss / len(train_loader),
                       "valid_loss": total_valid_loss / len(valid_loader)}
            history.append(metrics)
            if best_valid_loss > total_valid_loss / len(valid_loader):
                best_valid_loss = total_valid_loss / len(valid_loader)
        logging.info("time {:.2f}s".format(time.time() - start_time))
        return history


def make_loader(n):
    return [(torch.randn(2, 10, 8), torch.randint(1, 6, (2, 5)), torch.full((2,), 10)) for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Transformer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    preds = []

    def record(module, inputs, output):
        if not module.training:
            preds.append(output[0])

    model.register_forward_hook(record)
    history = Trainer().train(model, make_loader(2), [make_loader(2), make_loader(3)], opt, 0, 1)
    assert len(preds) == 5 and all(p.grad_fn is not None for p in preds)
    grads = torch.autograd.grad(preds[-1].sum(), model.out.weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: %d validation predictions (model in eval mode) carry grad_fns reaching the weights"
          % len(preds))
