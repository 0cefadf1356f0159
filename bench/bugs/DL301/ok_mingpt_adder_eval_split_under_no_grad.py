# source: https://github.com/karpathy/minGPT/blob/master/projects/adder/adder.py
# category: DL301
# expect: clean
# evidence: eval_split's loop runs only from the callback's `with torch.no_grad()` after model.eval() (and sample is @torch.no_grad()): every eval-mode forward runs with grad off
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset
from torch.utils.data.dataloader import DataLoader


class GPT(nn.Module):
    def __init__(self, vocab_size=10, block_size=6, n_embd=32):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.block = nn.TransformerEncoderLayer(n_embd, nhead=2, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.head = nn.Linear(n_embd, vocab_size)

    def get_block_size(self):
        return self.block_size
    def forward(self, idx, targets=None):
        t = idx.size(1)
        x = self.tok_emb(idx) + self.pos_emb[:, :t, :]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        logits = self.head(self.block(x, src_mask=mask, is_causal=True))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

@torch.no_grad()
def sample(model, x, steps, temperature=1.0, sample=False, top_k=None):
    block_size = model.get_block_size()
    model.eval()
    for k in range(steps):
        x_cond = x if x.size(1) <= block_size else x[:, -block_size:]  # crop context if needed
        logits, _ = model(x_cond)
        logits = logits[:, -1, :] / temperature
        probs = F.softmax(logits, dim=-1)
        if sample:
            ix = torch.multinomial(probs, num_samples=1)
        else:
            _, ix = torch.topk(probs, k=1, dim=-1)
        x = torch.cat((x, ix), dim=1)
    return x

class AdditionDataset(Dataset):
    def __init__(self, ndigit, split):
        self.ndigit = ndigit
        num = (10 ** ndigit) ** 2
        rng = torch.Generator()
        rng.manual_seed(1337)
        perm = torch.randperm(num, generator=rng)
        num_test = min(int(num * 0.2), 500)
        self.ixes = perm[:num_test] if split == 'test' else perm[num_test:]
    def __len__(self):
        return self.ixes.nelement()
    def __getitem__(self, idx):
        ndigit = self.ndigit
        idx = self.ixes[idx].item()
        nd = 10 ** ndigit
        a, b = idx // nd, idx % nd
        c = a + b
        render = f'%0{ndigit}d' % a + f'%0{ndigit}d' % b + (f'%0{ndigit + 1}d' % c)[::-1]
        dix = [int(s) for s in render]
        x = torch.tensor(dix[:-1], dtype=torch.long)
        y = torch.tensor(dix[1:], dtype=torch.long)
        y[:ndigit * 2 - 1] = -1
        return x, y

class Trainer:
    def __init__(self, model, train_dataset, max_iters, batch_size=32, learning_rate=5e-4):
        self.model, self.train_dataset = model, train_dataset
        self.max_iters, self.batch_size, self.learning_rate = max_iters, batch_size, learning_rate
        self.callbacks = {}
        self.device = 'cpu'
        self.iter_num = 0
    def register_callback(self, onevent, callback):
        self.callbacks.setdefault(onevent, []).append(callback)
    def trigger_callbacks(self, onevent):
        for callback in self.callbacks.get(onevent, []):
            callback(self)
    def run(self):
        model = self.model
        optimizer = torch.optim.AdamW(model.parameters(), lr=self.learning_rate)
        train_loader = DataLoader(self.train_dataset, batch_size=self.batch_size, shuffle=True)
        model.train()
        data_iter = iter(train_loader)
        while self.iter_num < self.max_iters:
            try:
                x, y = next(data_iter)
            except StopIteration:
                data_iter = iter(train_loader)
                x, y = next(data_iter)
            logits, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            optimizer.step()
            self.iter_num += 1
            self.trigger_callbacks('on_batch_end')

def build(ndigit=1, max_iters=20):
    train_dataset = AdditionDataset(ndigit, split='train')
    test_dataset = AdditionDataset(ndigit, split='test')
    model = GPT(vocab_size=10, block_size=3 * ndigit + 1 - 1)
    trainer = Trainer(model, train_dataset, max_iters)

    def eval_split(trainer, split, max_batches=None):
        dataset = {'train': train_dataset, 'test': test_dataset}[split]
        results = []
        factors = torch.tensor([[10 ** i for i in range(ndigit + 1)][::-1]])
        loader = DataLoader(dataset, batch_size=100, num_workers=0, drop_last=False)
        for b, (x, y) in enumerate(loader):
            d1d2 = x[:, :ndigit * 2]
            d1d2d3 = sample(model, d1d2, ndigit + 1, sample=False)
            d3 = d1d2d3[:, -(ndigit + 1):].flip(1)
            d1i = (d1d2[:, :ndigit] * factors[:, 1:]).sum(1)
            d2i = (d1d2[:, ndigit:ndigit * 2] * factors[:, 1:]).sum(1)
            correct = ((d3 * factors).sum(1) == d1i + d2i).cpu()
            results.extend(int(c) for c in correct)
            if max_batches is not None and b + 1 >= max_batches:
                break
        rt = torch.tensor(results, dtype=torch.float)
        print("%s final score: %d/%d = %.2f%% correct" % (split, rt.sum(), len(results), 100 * rt.mean()))
        return rt.sum()
    def batch_end_callback(trainer):
        if trainer.iter_num % 10 == 0:
            model.eval()
            with torch.no_grad():
                train_score = eval_split(trainer, 'train', max_batches=1)
                test_score = eval_split(trainer, 'test', max_batches=None)
            print(f"iter {trainer.iter_num}: score {int(train_score + test_score)}")
            model.train()
    trainer.register_callback('on_batch_end', batch_end_callback)
    return model, trainer

if __name__ == "__main__":
    torch.manual_seed(0)
    model, trainer = build(ndigit=1, max_iters=10)
    modes = []
    model.register_forward_hook(lambda m, i, o: modes.append((m.training, torch.is_grad_enabled())))
    trainer.run()
    eval_modes = [g for training, g in modes if not training]
    train_modes = [g for training, g in modes if training]
    assert eval_modes and not any(eval_modes)
    assert train_modes and all(train_modes)
    print("evidence holds: %d eval forwards all ran with grad off; %d training forwards with grad on"
          % (len(eval_modes), len(train_modes)))
