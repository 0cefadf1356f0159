# source: https://github.com/huggingface/transformers/issues/1648
# category: DL202
# expect: flag 80, 101
# evidence: the rhyme term is computed from logits taken out with .cpu().data.numpy() and added as a Python float, so the gradients of the modified LM loss are exactly those of the plain cross-entropy and the rhyme objective never trains the model
import numpy as np
import torch
import torch.nn as nn
from torch.nn import CrossEntropyLoss

torch.manual_seed(0)
np.random.seed(0)

VOCAB = ["<pad>", "the", "cat", "sat", "on", "mat", "hat", "bat", "dog", "log", "fog", "ran", "far", "car", "star", "night", "light"]


class GPT2Tokenizer(object):
    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def decode(self, ids):
        return " ".join(VOCAB[int(i) % len(VOCAB)] for i in ids)


class Lyrics(object):
    """Stand-in for the rhyme analyser used in the issue (average length of rhyming suffixes)."""

    def __init__(self, text, language='en-us', lookback=15):
        self.words = text.split()
        self.lookback = lookback

    def get_avg_rhyme_length(self):
        lengths = []
        for i, w in enumerate(self.words):
            best = 0
            for v in self.words[max(0, i - self.lookback):i]:
                k = 0
                while k < min(len(w), len(v)) and w[-1 - k] == v[-1 - k]:
                    k += 1
                if v != w:
                    best = max(best, k)
            lengths.append(best)
        return float(np.mean(lengths)) if lengths else 0.0


class GPT2Model(nn.Module):
    def __init__(self, vocab_size, n_embd=16, n_positions=32):
        super(GPT2Model, self).__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(n_positions, n_embd)
        self.h = nn.TransformerEncoderLayer(n_embd, nhead=2, dim_feedforward=32, batch_first=True, dropout=0.0)
        self.ln_f = nn.LayerNorm(n_embd)

    def forward(self, input_ids):
        T = input_ids.size(1)
        pos = torch.arange(T).unsqueeze(0)
        hidden_states = self.wte(input_ids) + self.wpe(pos)
        causal = torch.triu(torch.full((T, T), float('-inf')), diagonal=1)
        hidden_states = self.h(hidden_states, src_mask=causal)
        return (self.ln_f(hidden_states),)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab_size):
        super(GPT2LMHeadModel, self).__init__()
        self.transformer = GPT2Model(vocab_size)
        self.lm_head = nn.Linear(16, vocab_size, bias=False)

    def forward(self, input_ids, labels=None):
        transformer_outputs = self.transformer(input_ids)
        hidden_states = transformer_outputs[0]

        lm_logits = self.lm_head(hidden_states)

        outputs = (lm_logits,) + transformer_outputs[1:]
        if labels is not None:
            # Shift so that tokens < n predict n
            shift_logits = lm_logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            all_logits = shift_logits[0].cpu().data.numpy()
            tokenizer = GPT2Tokenizer.from_pretrained("gpt2")
            sampled_words = []
            for elem in all_logits:
                logits = elem.reshape(-1)
                exps = np.exp(logits - np.max(logits))
                output_logits_normalized = exps / np.sum(exps)
                sampled_word = np.array(np.argmax(output_logits_normalized)).reshape([1, 1])
                sampled_words.append(sampled_word)
            text = tokenizer.decode(np.array(sampled_words).reshape(-1))

            # Flatten the tokens
            loss_fct = CrossEntropyLoss(ignore_index=-1)
            loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)),
                            shift_labels.view(-1))
            print("CE Loss:", loss.cpu().data.numpy())
            l = Lyrics(text=text, language='en-us', lookback=15)
            rl = l.get_avg_rhyme_length()
            beta = 1
            rl_loss = beta / (rl + 1.0)
            print("Rhyme Loss:", rl_loss)
            loss = loss + rl_loss
            outputs = (loss,) + outputs

        return outputs  # (loss), lm_logits, presents, (all hidden_states), (attentions)


if __name__ == "__main__":
    model = GPT2LMHeadModel(len(VOCAB))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    input_ids = torch.randint(1, len(VOCAB), (1, 12))

    model.train()
    outputs = model(input_ids, labels=input_ids)
    loss = outputs[0]
    optimizer.zero_grad()
    loss.backward()
    grads_total = [p.grad.clone() for p in model.parameters()]

    # gradients of the plain cross-entropy, same weights and inputs
    optimizer.zero_grad()
    lm_logits = model(input_ids)[0]
    ce = CrossEntropyLoss(ignore_index=-1)(lm_logits[..., :-1, :].reshape(-1, len(VOCAB)), input_ids[..., 1:].reshape(-1))
    ce.backward()
    same = all(torch.allclose(g, p.grad) for g, p in zip(grads_total, model.parameters()))
    gap = loss.item() - ce.item()
    assert same and gap > 0
    optimizer.step()
    print("evidence holds: the rhyme term adds %.4f to the loss value but the gradients equal those of the "
          "cross-entropy alone" % gap)
