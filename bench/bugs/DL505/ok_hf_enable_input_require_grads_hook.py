# source: https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_utils.py
# category: DL505
# expect: clean
# evidence: with frozen embeddings and reentrant checkpointing the adapters get no gradient; the forward hook's output.requires_grad_(True) on the embedding output restores the path and the adapter weights get gradients
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, r=2):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.normal_(self.lora_B.weight, std=0.02)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x))


class TinyLM(nn.Module):
    def __init__(self, vocab=30, dim=8, n_layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([LoraLinear(nn.Linear(dim, dim)) for _ in range(n_layers)])
        self.lm_head = nn.Linear(dim, vocab)
        self.gradient_checkpointing = False

    def get_input_embeddings(self):
        return self.embed_tokens

    def enable_input_require_grads(self):
        def make_inputs_require_grads(module, input, output):
            output.requires_grad_(True)

        self._require_grads_hook = self.get_input_embeddings().register_forward_hook(make_inputs_require_grads)

    def forward(self, input_ids, labels):
        hidden = self.embed_tokens(input_ids)
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                hidden = checkpoint(layer, hidden, use_reentrant=True)
            else:
                hidden = layer(hidden)
        logits = self.lm_head(torch.tanh(hidden))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))


def prepare_for_lora_training(model):
    for name, p in model.named_parameters():
        p.requires_grad = "lora_" in name
    model.gradient_checkpointing = True
    model.enable_input_require_grads()
    return model


def lora_grads(model, input_ids, labels):
    model.train()
    loss = model(input_ids, labels)
    loss.backward()
    return [p.grad for n, p in model.named_parameters() if "lora_" in n]


if __name__ == "__main__":
    torch.manual_seed(0)
    input_ids = torch.randint(0, 30, (2, 5))
    labels = torch.randint(0, 30, (2, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = TinyLM()
        for name, p in plain.named_parameters():
            p.requires_grad = "lora_" in name
        plain.gradient_checkpointing = True
        try:
            grads_without = lora_grads(plain, input_ids, labels)
        except RuntimeError:
            grads_without = [None]
        model = prepare_for_lora_training(TinyLM())
        grads_with = lora_grads(model, input_ids, labels)
    assert any(g is None for g in grads_without)
    assert all(g is not None and g.abs().sum() > 0 for g in grads_with)
    print("evidence holds: requires_grad_(True) on the frozen embedding output lets the adapters receive gradients")
