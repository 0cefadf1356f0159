# source: https://github.com/pytorch/translate/pull/391
# category: DL603
# expect: flag 64, 65
# evidence: the KD term uses the teacher decoder's output probabilities as the target without detach(), so the KD loss alone backpropagates into the teacher decoder, pulling the teacher toward the student.
import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNDecoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, hidden_dim):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, embed_dim)
        self.rnn = nn.GRU(embed_dim + hidden_dim, hidden_dim, batch_first=True)
        self.output_projection = nn.Linear(hidden_dim, vocab_size)

    def forward(self, prev_output_tokens, encoder_out):
        x = self.embed_tokens(prev_output_tokens)
        ctx = encoder_out.mean(dim=1, keepdim=True).expand(-1, x.size(1), -1)
        h, _ = self.rnn(torch.cat([x, ctx], dim=-1))
        return self.output_projection(h)


class DualDecoderKDModel(nn.Module):
    """A shared encoder with a (larger) teacher decoder and a student decoder trained jointly."""

    def __init__(self, vocab_size=20, embed_dim=8, hidden_dim=16):
        super().__init__()
        self.encoder_embed = nn.Embedding(vocab_size, hidden_dim)
        self.encoder = nn.GRU(hidden_dim, hidden_dim, batch_first=True)
        self.teacher_decoder = RNNDecoder(vocab_size, embed_dim, hidden_dim)
        self.student_decoder = RNNDecoder(vocab_size, embed_dim, hidden_dim)

    def forward(self, src_tokens, prev_output_tokens):
        encoder_out, _ = self.encoder(self.encoder_embed(src_tokens))
        teacher_output = self.teacher_decoder(prev_output_tokens, encoder_out)
        student_output = self.student_decoder(prev_output_tokens, encoder_out)
        return teacher_output, student_output

    def get_normalized_probs(self, net_output, log_probs):
        if log_probs:
            return F.log_softmax(net_output, dim=-1)
        return F.softmax(net_output, dim=-1)


class DualDecoderCriterion:
    def __init__(self, padding_idx=0, kd_weight=0.5):
        self.padding_idx = padding_idx
        self.kd_weight = kd_weight

    def __call__(self, model, sample, reduce=True):
        teacher_output, student_output = model(sample["src_tokens"], sample["prev_output_tokens"])
        target = sample["target"].view(-1)

        teacher_lprobs = model.get_normalized_probs(teacher_output, log_probs=True)
        teacher_loss = F.nll_loss(teacher_lprobs.view(-1, teacher_lprobs.size(-1)), target,
                                  ignore_index=self.padding_idx, reduction="sum")

        student_lprobs = model.get_normalized_probs(student_output, log_probs=True)
        student_nll = F.nll_loss(student_lprobs.view(-1, student_lprobs.size(-1)), target,
                                 ignore_index=self.padding_idx, reduction="sum")

        # KD: the student decoder matches the teacher decoder's output distribution
        teacher_probs = model.get_normalized_probs(teacher_output, log_probs=False)
        kd_loss = -(teacher_probs * student_lprobs).sum()

        student_loss = (1 - self.kd_weight) * student_nll + self.kd_weight * kd_loss
        loss = teacher_loss + student_loss
        return loss, {"teacher_loss": teacher_loss.item(), "student_loss": student_loss.item(), "kd_loss": kd_loss}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = DualDecoderKDModel()
    criterion = DualDecoderCriterion()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    sample = {
        "src_tokens": torch.randint(1, 20, (3, 7)),
        "prev_output_tokens": torch.randint(1, 20, (3, 5)),
        "target": torch.randint(1, 20, (3, 5)),
    }

    optimizer.zero_grad()
    loss, logging_output = criterion(model, sample)

    kd_grads = torch.autograd.grad(
        logging_output["kd_loss"], list(model.teacher_decoder.parameters()), retain_graph=True, allow_unused=True
    )
    loss.backward()
    optimizer.step()

    kd_into_teacher = sum(g.abs().sum().item() for g in kd_grads if g is not None)
    assert kd_into_teacher > 0
    print("evidence holds: the KD term alone sends gradient into the teacher decoder (|grad| sum = {:.4f})".format(kd_into_teacher))
