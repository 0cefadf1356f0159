# source: https://github.com/facebookarchive/loop/issues/57
# category: DL301
# expect: flag 15, 52, 53, 54, 55, 57
# evidence: evaluate() still marks its inputs volatile=True, which has no effect since torch 0.4 (only a warning), so every validation forward builds a graph: the outputs carry grad_fns and autograd saves activations
import warnings

import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable


def wrap(data, **kwargs):
    if torch.is_tensor(data):
        var = Variable(data, **kwargs)
        return var
    return tuple([wrap(x, **kwargs) for x in data])


class MaskedMSE(nn.Module):
    def __init__(self):
        super(MaskedMSE, self).__init__()
        self.criterion = nn.MSELoss(reduction='sum')

    def forward(self, input, target, mask):
        mask = mask.unsqueeze(2).expand_as(input)
        return self.criterion(input * mask, target * mask) / mask.sum()


class Loop(nn.Module):
    """Speaker-conditioned text -> acoustic-frame model (tiny GRU version)."""

    def __init__(self, vocabulary_size=10, nspk=3, hidden_size=16, output_size=6):
        super(Loop, self).__init__()
        self.encoder = nn.Embedding(vocabulary_size, hidden_size)
        self.spkr = nn.Embedding(nspk, hidden_size)
        self.decoder = nn.GRU(output_size + hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, src, tgt, start=True):
        txt, spkr = src
        context = self.encoder(txt).mean(1) + self.spkr(spkr)
        steps = tgt.size(1)
        dec_in = torch.cat([tgt, context.unsqueeze(1).expand(-1, steps, -1)], dim=2)
        h, hidden = self.decoder(dec_in)
        return self.out(h), hidden


def evaluate(model, criterion, epoch, eval_losses, valid_loader):
    total = 0

    for txt, feat, spkr in valid_loader:
        input = wrap(txt, volatile=True)
        target = wrap(feat, volatile=True)
        spkr = wrap(spkr, volatile=True)

        output, _ = model([input, spkr], target[0])
        loss = criterion(output, target[0], target[1])

        total += loss.item()

    avg = total / len(valid_loader)
    eval_losses.append(avg)
    print('====> Test set loss: {:.4f}'.format(avg))
    return avg


def train(model, criterion, optimizer, epoch, train_losses, train_loader):
    total = 0
    model.train()
    for txt, feat, spkr in train_loader:
        input, target, spkr = wrap(txt), wrap(feat), wrap(spkr)
        optimizer.zero_grad()
        output, _ = model([input, spkr], target[0])
        loss = criterion(output, target[0], target[1])
        loss.backward()
        optimizer.step()
        total += loss.item()
    train_losses.append(total / len(train_loader))


def main(train_loader, valid_loader, epochs=2):
    model = Loop()
    criterion = MaskedMSE()
    optimizer = optim.Adam(model.parameters(), lr=1e-4)
    train_losses, eval_losses = [], []
    best_eval = float('inf')
    for epoch in range(1, epochs + 1):
        train(model, criterion, optimizer, epoch, train_losses, train_loader)
        eval_loss = evaluate(model, criterion, epoch, eval_losses, valid_loader)
        if eval_loss < best_eval:
            best_eval = eval_loss
    return model


def make_batch():
    txt = torch.randint(0, 10, (2, 5))
    feat = (torch.randn(2, 7, 6), torch.ones(2, 7))
    spkr = torch.randint(0, 3, (2,))
    return txt, feat, spkr


if __name__ == "__main__":
    torch.manual_seed(0)
    train_loader = [make_batch() for _ in range(2)]
    valid_loader = [make_batch() for _ in range(3)]
    model = Loop()
    outputs = []
    model.out.register_forward_hook(lambda mod, inp, out: outputs.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            evaluate(model, MaskedMSE(), 1, [], valid_loader)
    assert any("volatile was removed" in str(w.message) for w in caught)
    assert len(outputs) == 3 and all(o.grad_fn is not None for o in outputs)
    assert sum(saved) > 0
    main(train_loader, valid_loader)
    print("evidence holds: volatile=True is ignored (torch warns); %d validation outputs carry grad_fns, %d bytes saved"
          % (len(outputs), sum(saved)))
