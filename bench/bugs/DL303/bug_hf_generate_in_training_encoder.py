# source: https://github.com/huggingface/transformers/issues/30713
# category: DL303
# expect: flag 64, 83
# evidence: encoding queries through generate() (decorated with @torch.no_grad()) gives hidden states without a graph, so the contrastive loss.backward() raises "element 0 of tensors does not require grad"; the forward-based encoder trains
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyCausalLM(nn.Module):
    """A decoder-only LM with the generate() API of the library: generation runs without grad."""

    def __init__(self, vocab_size=20, hidden=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden)
        self.layer = nn.GRU(hidden, hidden, batch_first=True)
        self.lm_head = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids, attention_mask=None, output_hidden_states=False, return_dict=True):
        h, _ = self.layer(self.embed_tokens(input_ids))
        if attention_mask is not None:
            h = h * attention_mask.unsqueeze(-1)
        logits = self.lm_head(h)
        return SimpleNamespace(logits=logits, hidden_states=(h,) if output_hidden_states else None)

    @torch.no_grad()
    def generate(self, input_ids, attention_mask=None, max_new_tokens=2,
                 output_hidden_states=False, return_dict_in_generate=False):
        sequences = input_ids
        mask = attention_mask
        step_hidden = []
        for _ in range(max_new_tokens):
            out = self(sequences, attention_mask=mask, output_hidden_states=True)
            step_hidden.append(out.hidden_states)
            next_token = out.logits[:, -1].argmax(-1, keepdim=True)
            sequences = torch.cat([sequences, next_token], dim=1)
            if mask is not None:
                mask = torch.cat([mask, torch.ones_like(next_token)], dim=1)
        if return_dict_in_generate:
            return SimpleNamespace(sequences=sequences, hidden_states=tuple(step_hidden) if output_hidden_states else None)
        return sequences


class EncoderModel(nn.Module):
    """Dense retriever: queries and passages are embedded by the LM's last hidden state."""

    def __init__(self, lora_model, temperature=0.05, use_generate=False):
        super().__init__()
        self.encoder = lora_model
        self.temperature = temperature
        self.use_generate = use_generate

    def encode_general(self, qry):
        inputs = {
            'input_ids': qry['input_ids'],
            'attention_mask': qry['attention_mask'],
        }
        if not self.use_generate:
            outputs = self.encoder(**inputs, output_hidden_states=True, return_dict=True)
            reps = outputs.hidden_states[-1][:, -1, :]
        else:
            outputs = self.encoder.generate(**inputs, max_new_tokens=2, output_hidden_states=True,
                                            return_dict_in_generate=True)
            reps = outputs.hidden_states[-1][-1][:, -1, :]
        return F.normalize(reps, dim=-1)

    def forward(self, qry, psg):
        q_reps = self.encode_general(qry)
        p_reps = self.encode_general(psg)
        scores = q_reps @ p_reps.T / self.temperature
        target = torch.arange(scores.size(0))
        return F.cross_entropy(scores, target)


def train(model, batches, lr=1e-2):
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for qry, psg in batches:
        loss = model(qry, psg)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def make_batches(n=2, bsz=3, seq=5, vocab=20):
    def tok():
        return {'input_ids': torch.randint(0, vocab, (bsz, seq)), 'attention_mask': torch.ones(bsz, seq)}
    return [(tok(), tok()) for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    batches = make_batches()

    ok_model = EncoderModel(TinyCausalLM(), use_generate=False)
    w0 = ok_model.encoder.layer.weight_hh_l0.detach().clone()
    train(ok_model, batches)
    assert not torch.equal(w0, ok_model.encoder.layer.weight_hh_l0.detach())

    gen_model = EncoderModel(TinyCausalLM(), use_generate=True)
    w1 = gen_model.encoder.layer.weight_hh_l0.detach().clone()
    try:
        train(gen_model, batches)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "element 0 of tensors does not require grad" in raised, raised
    assert torch.equal(w1, gen_model.encoder.layer.weight_hh_l0.detach())
    print("evidence holds: the forward-based encoder trains; the generate()-based one yields no graph and backward raises")
