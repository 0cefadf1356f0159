# source: https://github.com/Sundrops/video-caption.pytorch/issues/5
# category: DL103
# expect: flag 61
# evidence: the first iteration steps the optimizer and then raises "IndexError: invalid index of a 0-dim tensor" at train_loss = loss.data[0]
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.utils import clip_grad_value_


class LanguageModelCriterion(nn.Module):
    def __init__(self):
        super(LanguageModelCriterion, self).__init__()
        self.loss_fn = nn.NLLLoss(reduction='none')

    def forward(self, logits, target, mask):
        batch_size = logits.shape[0]
        target = target[:, :logits.shape[1]]
        mask = mask[:, :logits.shape[1]]
        logits = logits.contiguous().view(-1, logits.shape[2])
        target = target.contiguous().view(-1)
        mask = mask.contiguous().view(-1)
        loss = self.loss_fn(logits, target)
        return torch.sum(loss * mask) / batch_size


class S2VTModel(nn.Module):
    def __init__(self, vocab_size=12, dim_vid=6, dim_hidden=8, max_len=5):
        super(S2VTModel, self).__init__()
        self.rnn1 = nn.GRU(dim_vid, dim_hidden, batch_first=True)
        self.rnn2 = nn.GRU(dim_hidden + dim_hidden, dim_hidden, batch_first=True)
        self.embedding = nn.Embedding(vocab_size, dim_hidden)
        self.out = nn.Linear(dim_hidden, vocab_size)
        self.max_len = max_len

    def forward(self, vid_feats, target_variable=None, mode='train'):
        output1, state1 = self.rnn1(vid_feats)
        context = output1.mean(1, keepdim=True).expand(-1, self.max_len - 1, -1)
        words = self.embedding(target_variable[:, :self.max_len - 1])
        output2, _ = self.rnn2(torch.cat([words, context], dim=2), state1)
        seq_probs = F.log_softmax(self.out(output2), dim=2)
        return seq_probs, None


def train(loader, model, crit, optimizer, lr_scheduler, opt):
    model.train()
    for epoch in range(opt["epochs"]):
        iteration = 0
        for data in loader:
            fc_feats = data['fc_feats']
            labels = data['labels']
            masks = data['masks']

            optimizer.zero_grad()
            seq_probs, _ = model(fc_feats, labels, 'train')
            loss = crit(seq_probs, labels[:, 1:], masks[:, 1:])
            loss.backward()
            clip_grad_value_(model.parameters(), opt['grad_clip'])
            optimizer.step()
            train_loss = loss.data[0]
            iteration += 1
            print("iter %d (epoch %d), train_loss = %.6f" % (iteration, epoch, train_loss))
        lr_scheduler.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    opt = {"epochs": 1, "grad_clip": 5}
    model = S2VTModel()
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    lr_scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.8)
    loader = [{'fc_feats': torch.randn(2, 3, 6), 'labels': torch.randint(0, 12, (2, 5)), 'masks': torch.ones(2, 5)}]
    before = [p.detach().clone() for p in model.parameters()]
    try:
        train(loader, model, LanguageModelCriterion(), optimizer, lr_scheduler, opt)
    except IndexError as err:
        assert "invalid index of a 0-dim tensor" in str(err), str(err)
    else:
        raise AssertionError("loss.data[0] should fail on a 0-dim loss")
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters())), "the step itself ran"
    print("evidence holds: the optimizer stepped, then train_loss = loss.data[0] raised IndexError")
