# source: https://github.com/ruotianluo/self-critical.pytorch/issues/197
# category: DL204
# expect: clean
# evidence: with scheduled sampling on (ss_prob=0.5), _forward edits only fresh copies (it = seq[:, i].data.clone(); prob_prev = torch.exp(outputs[:, i-1].detach())); backward runs without error, every parameter gets a gradient and moves, and the labels are left untouched.
"""
captioning/models/AttModel.py (_forward with scheduled sampling, get_logprobs_state) on a plain
LSTM core, LanguageModelCriterion from captioning/modules/losses.py and the train.py step, shrunk.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class LanguageModelCriterion(nn.Module):
    def __init__(self):
        super(LanguageModelCriterion, self).__init__()

    def forward(self, input, target, mask):
        # truncate to the same size
        target = target[:, :input.size(1)]
        mask = mask[:, :input.size(1)].to(input)
        output = -input.gather(2, target.unsqueeze(2)).squeeze(2) * mask
        output = torch.sum(output) / torch.sum(mask)
        return output


class LSTMCore(nn.Module):
    def __init__(self, opt):
        super(LSTMCore, self).__init__()
        self.lstm = nn.LSTMCell(opt.input_encoding_size + opt.fc_feat_size, opt.rnn_size)

    def forward(self, xt, fc_feats, state):
        h, c = self.lstm(torch.cat([xt, fc_feats], 1), (state[0][0], state[1][0]))
        return h, (h.unsqueeze(0), c.unsqueeze(0))


class AttModel(nn.Module):
    def __init__(self, opt):
        super(AttModel, self).__init__()
        self.vocab_size = opt.vocab_size
        self.rnn_size = opt.rnn_size
        self.ss_prob = 0.0  # Schedule sampling probability
        self.embed = nn.Sequential(nn.Embedding(self.vocab_size + 1, opt.input_encoding_size), nn.ReLU())
        self.fc_embed = nn.Sequential(nn.Linear(opt.fc_feat_size, opt.fc_feat_size), nn.ReLU())
        self.core = LSTMCore(opt)
        self.logit = nn.Linear(self.rnn_size, self.vocab_size + 1)

    def init_hidden(self, bsz):
        weight = self.logit.weight
        return (weight.new_zeros(1, bsz, self.rnn_size), weight.new_zeros(1, bsz, self.rnn_size))

    def _forward(self, fc_feats, seq, seq_per_img=1):
        batch_size = fc_feats.size(0)
        state = self.init_hidden(batch_size * seq_per_img)
        outputs = fc_feats.new_zeros(batch_size * seq_per_img, seq.size(1), self.vocab_size + 1)
        p_fc_feats = self.fc_embed(fc_feats)
        for i in range(seq.size(1)):
            if self.training and i >= 1 and self.ss_prob > 0.0:  # otherwiste no need to sample
                sample_prob = fc_feats.new(batch_size * seq_per_img).uniform_(0, 1)
                sample_mask = sample_prob < self.ss_prob
                if sample_mask.sum() == 0:
                    it = seq[:, i].clone()
                else:
                    sample_ind = sample_mask.nonzero().view(-1)
                    it = seq[:, i].data.clone()
                    prob_prev = torch.exp(outputs[:, i - 1].detach())  # fetch prev distribution: shape Nx(M+1)
                    it.index_copy_(0, sample_ind, torch.multinomial(prob_prev, 1).view(-1).index_select(0, sample_ind))
                    self.n_sampled += int((it != seq[:, i]).sum())
            else:
                it = seq[:, i].clone()
            # break if all the sequences end
            if i >= 1 and seq[:, i].sum() == 0:
                break
            output, state = self.get_logprobs_state(it, p_fc_feats, state)
            outputs[:, i] = output
        return outputs

    def get_logprobs_state(self, it, fc_feats, state):
        # 'it' contains a word index
        xt = self.embed(it)
        output, state = self.core(xt, fc_feats, state)
        logprobs = F.log_softmax(self.logit(output), dim=1)
        return logprobs, state

    def forward(self, fc_feats, seq):
        return self._forward(fc_feats, seq)


if __name__ == "__main__":
    torch.manual_seed(0)
    opt = argparse.Namespace(vocab_size=12, input_encoding_size=8, rnn_size=16, fc_feat_size=10,
                             ss_prob=0.5, learning_rate=5e-3, grad_clip_value=0.1)
    model = AttModel(opt)
    crit = LanguageModelCriterion()
    optimizer = torch.optim.Adam(model.parameters(), lr=opt.learning_rate)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    model.train()
    model.ss_prob = opt.ss_prob
    model.n_sampled = 0
    for iteration in range(3):
        fc_feats = torch.randn(6, opt.fc_feat_size)
        labels = torch.randint(1, opt.vocab_size + 1, (6, 7))
        labels[:, 0] = 0
        masks = torch.ones(6, 7)
        labels_copy = labels.clone()
        optimizer.zero_grad()
        loss = crit(model(fc_feats, labels[..., :-1]), labels[..., 1:], masks[..., 1:])
        loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        torch.nn.utils.clip_grad_value_(model.parameters(), opt.grad_clip_value)
        optimizer.step()
        assert torch.equal(labels, labels_copy)

    assert model.n_sampled > 0
    assert all(g is not None and g.abs().sum().item() > 0 for g in grads.values())
    with torch.no_grad():
        assert all(not torch.equal(before[n], p) for n, p in model.named_parameters())
    print("evidence holds: scheduled sampling replaced", model.n_sampled, "tokens and every parameter trained")
