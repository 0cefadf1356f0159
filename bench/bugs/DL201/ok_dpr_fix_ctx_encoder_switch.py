# source: https://github.com/facebookresearch/DPR/issues/196
# category: DL201
# expect: clean
# evidence: with fix_ctx_encoder=False both encoders get gradients; with fix_ctx_encoder=True (the documented switch) only the question encoder trains
import torch
from torch import nn
import torch.nn.functional as F


class HFBertEncoder(nn.Module):
    def __init__(self, vocab_size=50, hidden=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden)
        self.layer = nn.Linear(hidden, hidden)

    def forward(self, input_ids, token_type_ids, attention_mask):
        sequence_output = torch.tanh(self.layer(self.embeddings(input_ids)))
        pooled_output = sequence_output[:, 0, :]
        return sequence_output, pooled_output, None


class BiEncoder(nn.Module):
    def __init__(self, question_model, ctx_model, fix_q_encoder=False, fix_ctx_encoder=False):
        super().__init__()
        self.question_model = question_model
        self.ctx_model = ctx_model
        self.fix_q_encoder = fix_q_encoder
        self.fix_ctx_encoder = fix_ctx_encoder

    @staticmethod
    def get_representation(sub_model, ids, segments, attn_mask, fix_encoder=False):
        sequence_output, pooled_output, hidden_states = None, None, None
        if ids is not None:
            if fix_encoder:
                with torch.no_grad():
                    sequence_output, pooled_output, hidden_states = sub_model(ids, segments, attn_mask)
                if sub_model.training:
                    sequence_output.requires_grad_(requires_grad=True)
                    pooled_output.requires_grad_(requires_grad=True)
            else:
                sequence_output, pooled_output, hidden_states = sub_model(ids, segments, attn_mask)
        return sequence_output, pooled_output, hidden_states

    def forward(self, question_ids, question_segments, question_attn_mask, context_ids, ctx_segments, ctx_attn_mask):
        _q_seq, q_pooled_out, _q_hidden = self.get_representation(
            self.question_model, question_ids, question_segments, question_attn_mask, self.fix_q_encoder
        )
        _ctx_seq, ctx_pooled_out, _ctx_hidden = self.get_representation(
            self.ctx_model, context_ids, ctx_segments, ctx_attn_mask, self.fix_ctx_encoder
        )
        return q_pooled_out, ctx_pooled_out


class BiEncoderNllLoss:
    def calc(self, q_vectors, ctx_vectors, positive_idx_per_question):
        scores = torch.matmul(q_vectors, ctx_vectors.t())
        softmax_scores = F.log_softmax(scores, dim=1)
        return F.nll_loss(softmax_scores, torch.tensor(positive_idx_per_question), reduction="mean")


def train_step(biencoder, optimizer, batch):
    q_ids, ctx_ids, positives = batch
    biencoder.train()
    q_vec, ctx_vec = biencoder(q_ids, None, None, ctx_ids, None, None)
    loss = BiEncoderNllLoss().calc(q_vec, ctx_vec, positives)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    batch = (torch.randint(0, 50, (3, 5)), torch.randint(0, 50, (6, 5)), [0, 2, 4])

    full = BiEncoder(HFBertEncoder(), HFBertEncoder(), fix_ctx_encoder=False)
    train_step(full, torch.optim.AdamW(full.parameters(), lr=1e-3), batch)
    assert all(p.grad is not None for p in full.ctx_model.parameters())

    fixed = BiEncoder(HFBertEncoder(), HFBertEncoder(), fix_ctx_encoder=True)
    ctx_before = [p.detach().clone() for p in fixed.ctx_model.parameters()]
    train_step(fixed, torch.optim.AdamW(fixed.parameters(), lr=1e-3), batch)
    assert all(p.grad is not None for p in fixed.question_model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(ctx_before, fixed.ctx_model.parameters()))
    print("evidence holds: the context encoder is frozen only when the fix_ctx_encoder switch asks for it")
