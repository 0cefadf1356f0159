# source: https://github.com/karpathy/minGPT/blob/031ad36f292df6d3bcbec677f10a09ce54cb7f50/mingpt/trainer.py
# category: DL301
# expect: clean
# evidence: run_epoch(test_loader, is_train=False) puts the model in eval mode via model.train(False) and forwards under torch.set_grad_enabled(False): test forwards build no graph, training forwards do
import math

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data.dataloader import DataLoader


class TrainerConfig:
    max_epochs = 10
    batch_size = 64
    learning_rate = 3e-4
    grad_norm_clip = 1.0
    lr_decay = False
    warmup_tokens = 375e6
    final_tokens = 260e9
    num_workers = 0

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


class TinyGPT(nn.Module):
    def __init__(self, vocab_size=12, block_size=8, n_embd=24):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        x = self.drop(self.tok_emb(idx) + self.pos_emb[:, :idx.size(1)])
        logits = self.head(torch.tanh(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, config):
        return torch.optim.AdamW(self.parameters(), lr=config.learning_rate, betas=(0.9, 0.95))


class Trainer:

    def __init__(self, model, train_dataset, test_dataset, config):
        self.model = model
        self.train_dataset = train_dataset
        self.test_dataset = test_dataset
        self.config = config
        self.device = 'cpu'

    def train(self):
        model, config = self.model, self.config
        raw_model = model.module if hasattr(self.model, "module") else model
        optimizer = raw_model.configure_optimizers(config)

        def run_epoch(loader, is_train):
            model.train(is_train)

            losses = []
            for it, (x, y) in enumerate(loader):

                # place data on the correct device
                x = x.to(self.device)
                y = y.to(self.device)

                # forward the model
                with torch.set_grad_enabled(is_train):
                    logits, loss = model(x, y)
                    loss = loss.mean()  # collapse all losses if they are scattered on multiple gpus
                    losses.append(loss.item())

                if is_train:

                    # backprop and update the parameters
                    model.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
                    optimizer.step()

                    # decay the learning rate based on our progress
                    if config.lr_decay:
                        self.tokens += (y >= 0).sum()
                        if self.tokens < config.warmup_tokens:
                            lr_mult = float(self.tokens) / float(max(1, config.warmup_tokens))
                        else:
                            progress = float(self.tokens - config.warmup_tokens) / float(
                                max(1, config.final_tokens - config.warmup_tokens))
                            lr_mult = max(0.1, 0.5 * (1.0 + math.cos(math.pi * progress)))
                        lr = config.learning_rate * lr_mult
                        for param_group in optimizer.param_groups:
                            param_group['lr'] = lr

            if not is_train:
                test_loss = float(np.mean(losses))
                print("test loss: %f" % test_loss)
                return test_loss

        best_loss = float('inf')
        self.tokens = 0  # counter used for learning rate decay
        train_loader = DataLoader(self.train_dataset, shuffle=True, batch_size=config.batch_size,
                                  num_workers=config.num_workers)
        test_loader = DataLoader(self.test_dataset, shuffle=True, batch_size=config.batch_size,
                                 num_workers=config.num_workers)
        history = []
        for epoch in range(config.max_epochs):
            run_epoch(train_loader, is_train=True)
            test_loss = run_epoch(test_loader, is_train=False)
            history.append(test_loss)
            best_loss = min(best_loss, test_loss)
        return history


def make_dataset(n, seed):
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, 12, (n, 1), generator=g)
    seq = (start + torch.arange(9)) % 12
    return list(zip(seq[:, :-1], seq[:, 1:]))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyGPT()
    modes = []
    model.register_forward_hook(lambda m, i, o: modes.append((m.training, torch.is_grad_enabled())))
    config = TrainerConfig(max_epochs=3, batch_size=16, learning_rate=1e-2, lr_decay=True, warmup_tokens=64,
                           final_tokens=2000)
    history = Trainer(model, make_dataset(64, 1), make_dataset(32, 2), config).train()
    assert all(not grad for training, grad in modes if not training)
    assert all(grad for training, grad in modes if training)
    assert history[-1] < history[0]
    print("evidence holds: %d test forwards ran with grad off; test loss %.3f -> %.3f"
          % (sum(1 for t, _ in modes if not t), history[0], history[-1]))
