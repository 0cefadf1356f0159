# source: https://github.com/facebookresearch/DrQA/blob/master/drqa/reader/layers.py
# category: DL101
# expect: clean
# evidence: the -inf fill through .data happens on raw scores that no backward needs, right before softmax, so every parameter gets exactly the gradient of an out-of-place masked_fill and the reader trains
"""Definitions of model layers/NN modules"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SeqAttnMatch(nn.Module):
    """Given sequences X and Y, match sequence Y to each element in X.

    * o_i = sum(alpha_j * y_j) for i in X
    * alpha_j = softmax(y_j * x_i)
    """

    def __init__(self, input_size, identity=False):
        super(SeqAttnMatch, self).__init__()
        if not identity:
            self.linear = nn.Linear(input_size, input_size)
        else:
            self.linear = None

    def forward(self, x, y, y_mask):
        """
        Args:
            x: batch * len1 * hdim
            y: batch * len2 * hdim
            y_mask: batch * len2 (1 for padding, 0 for true)
        Output:
            matched_seq: batch * len1 * hdim
        """
        # Project vectors
        if self.linear:
            x_proj = self.linear(x.view(-1, x.size(2))).view(x.size())
            x_proj = F.relu(x_proj)
            y_proj = self.linear(y.view(-1, y.size(2))).view(y.size())
            y_proj = F.relu(y_proj)
        else:
            x_proj = x
            y_proj = y

        # Compute scores
        scores = x_proj.bmm(y_proj.transpose(2, 1))

        # Mask padding
        y_mask = y_mask.unsqueeze(1).expand(scores.size())
        scores.data.masked_fill_(y_mask.data, -float('inf'))

        # Normalize with softmax
        alpha_flat = F.softmax(scores.view(-1, y.size(1)), dim=-1)
        alpha = alpha_flat.view(-1, x.size(1), y.size(1))

        # Take weighted average
        matched_seq = alpha.bmm(y)
        return matched_seq


class BilinearSeqAttn(nn.Module):
    """A bilinear attention layer over a sequence X w.r.t y:

    * o_i = softmax(x_i'Wy) for x_i in X.
    """

    def __init__(self, x_size, y_size, identity=False, normalize=True):
        super(BilinearSeqAttn, self).__init__()
        self.normalize = normalize

        # If identity is true, we just use a dot product without transformation.
        if not identity:
            self.linear = nn.Linear(y_size, x_size)
        else:
            self.linear = None

    def forward(self, x, y, x_mask):
        """
        Args:
            x: batch * len * hdim1
            y: batch * hdim2
            x_mask: batch * len (1 for padding, 0 for true)
        Output:
            alpha = batch * len
        """
        Wy = self.linear(y) if self.linear is not None else y
        xWy = x.bmm(Wy.unsqueeze(2)).squeeze(2)
        xWy.data.masked_fill_(x_mask.data, -float('inf'))
        if self.normalize:
            if self.training:
                # In training we output log-softmax for NLL
                alpha = F.log_softmax(xWy, dim=-1)
            else:
                # ...Otherwise 0-1 probabilities
                alpha = F.softmax(xWy, dim=-1)
        else:
            alpha = xWy.exp()
        return alpha


class LinearSeqAttn(nn.Module):
    """Self attention over a sequence:

    * o_i = softmax(Wx_i) for x_i in X.
    """

    def __init__(self, input_size):
        super(LinearSeqAttn, self).__init__()
        self.linear = nn.Linear(input_size, 1)

    def forward(self, x, x_mask):
        """
        Args:
            x: batch * len * hdim
            x_mask: batch * len (1 for padding, 0 for true)
        Output:
            alpha: batch * len
        """
        x_flat = x.view(-1, x.size(-1))
        scores = self.linear(x_flat).view(x.size(0), x.size(1))
        scores.data.masked_fill_(x_mask.data, -float('inf'))
        alpha = F.softmax(scores, dim=-1)
        return alpha


def weighted_avg(x, weights):
    """Return a weighted average of x (a sequence of vectors).

    Args:
        x: batch * len * hdim
        weights: batch * len, sum(dim = 1) = 1
    Output:
        x_avg: batch * hdim
    """
    return weights.unsqueeze(1).bmm(x).squeeze(1)


class RnnDocReader(nn.Module):
    """Network for the Document Reader module of DrQA (tiny version)."""

    def __init__(self, vocab_size, embedding_dim, hidden_size):
        super(RnnDocReader, self).__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.qemb_match = SeqAttnMatch(embedding_dim)
        self.doc_rnn = nn.LSTM(2 * embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.question_rnn = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.self_attn = LinearSeqAttn(2 * hidden_size)
        self.start_attn = BilinearSeqAttn(2 * hidden_size, 2 * hidden_size)
        self.end_attn = BilinearSeqAttn(2 * hidden_size, 2 * hidden_size)

    def forward(self, x1, x1_mask, x2, x2_mask):
        x1_emb = self.embedding(x1)
        x2_emb = self.embedding(x2)
        x2_weighted_emb = self.qemb_match(x1_emb, x2_emb, x2_mask)
        drnn_input = torch.cat([x1_emb, x2_weighted_emb], 2)
        doc_hiddens, _ = self.doc_rnn(drnn_input)
        question_hiddens, _ = self.question_rnn(x2_emb)
        doc_hiddens = doc_hiddens.contiguous()
        question_hiddens = question_hiddens.contiguous()
        q_merge_weights = self.self_attn(question_hiddens, x2_mask)
        question_hidden = weighted_avg(question_hiddens, q_merge_weights)
        start_scores = self.start_attn(doc_hiddens, question_hidden, x1_mask)
        end_scores = self.end_attn(doc_hiddens, question_hidden, x1_mask)
        return start_scores, end_scores


def reference_forward(net, x1, x1_mask, x2, x2_mask):
    """Same computation with out-of-place masked_fill (used only to check gradients)."""
    x1_emb = net.embedding(x1)
    x2_emb = net.embedding(x2)
    lin = net.qemb_match.linear
    x_proj = F.relu(lin(x1_emb))
    y_proj = F.relu(lin(x2_emb))
    scores = x_proj.bmm(y_proj.transpose(2, 1))
    scores = scores.masked_fill(x2_mask.unsqueeze(1).expand(scores.size()), -float('inf'))
    x2_weighted_emb = F.softmax(scores, dim=-1).bmm(x2_emb)
    doc_hiddens, _ = net.doc_rnn(torch.cat([x1_emb, x2_weighted_emb], 2))
    question_hiddens, _ = net.question_rnn(x2_emb)
    qs = net.self_attn.linear(question_hiddens).squeeze(-1).masked_fill(x2_mask, -float('inf'))
    question_hidden = weighted_avg(question_hiddens, F.softmax(qs, dim=-1))
    outs = []
    for attn in (net.start_attn, net.end_attn):
        xWy = doc_hiddens.bmm(attn.linear(question_hidden).unsqueeze(2)).squeeze(2)
        outs.append(F.log_softmax(xWy.masked_fill(x1_mask, -float('inf')), dim=-1))
    return outs


if __name__ == "__main__":
    import copy
    net = RnnDocReader(vocab_size=30, embedding_dim=8, hidden_size=6)
    ref = copy.deepcopy(net)
    optimizer = torch.optim.Adamax(net.parameters())

    x1 = torch.randint(1, 30, (3, 7))
    x1_mask = torch.zeros(3, 7, dtype=torch.bool)
    x1_mask[1, 5:] = True
    x1_mask[2, 4:] = True
    x2 = torch.randint(1, 30, (3, 4))
    x2_mask = torch.zeros(3, 4, dtype=torch.bool)
    x2_mask[0, 3:] = True
    target_s = torch.tensor([1, 2, 0])
    target_e = torch.tensor([3, 4, 2])

    net.train()
    before = [p.detach().clone() for p in net.parameters()]
    score_s, score_e = net(x1, x1_mask, x2, x2_mask)
    loss = F.nll_loss(score_s, target_s) + F.nll_loss(score_e, target_e)
    optimizer.zero_grad()
    loss.backward()

    ref_s, ref_e = reference_forward(ref, x1, x1_mask, x2, x2_mask)
    ref_loss = F.nll_loss(ref_s, target_s) + F.nll_loss(ref_e, target_e)
    ref_loss.backward()

    max_diff = 0.0
    for (name, p), q in zip(net.named_parameters(), ref.parameters()):
        assert p.grad is not None, name
        max_diff = max(max_diff, (p.grad - q.grad).abs().max().item())
    assert abs(loss.item() - ref_loss.item()) < 1e-6
    assert max_diff < 1e-6, max_diff
    optimizer.step()
    changed = all(not torch.equal(b, p.detach()) for b, p in zip(before, net.parameters())
                  if b.dim() > 1 and b.shape[0] != 30)
    assert changed
    print("evidence holds: all reader parameters get the same gradients as with out-of-place masked_fill "
          "(max diff %.1e) and the Adamax step changes the weights" % max_diff)
