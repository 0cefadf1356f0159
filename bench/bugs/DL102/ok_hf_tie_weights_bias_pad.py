# source: https://github.com/huggingface/transformers/blob/v4.30.0/src/transformers/modeling_utils.py
# category: DL102
# expect: clean
# evidence: _tie_or_clone_weights pads the LM-head bias through .data while the model is being built or resized, before an optimizer exists: weights stay tied, the bias matches the new vocabulary and training updates it
import torch
from torch import nn


class TinyLMConfig(object):
    vocab_size = 20
    hidden_size = 8
    torchscript = False


class TinyLMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=True)
        self.tie_weights()

    def get_input_embeddings(self):
        return self.wte

    def get_output_embeddings(self):
        return self.lm_head

    def tie_weights(self):
        self._tie_or_clone_weights(self.get_output_embeddings(), self.get_input_embeddings())

    def _tie_or_clone_weights(self, output_embeddings, input_embeddings):
        """Tie or clone module weights depending of whether we are using TorchScript or not"""
        if self.config.torchscript:
            output_embeddings.weight = nn.Parameter(input_embeddings.weight.clone())
        else:
            output_embeddings.weight = input_embeddings.weight

        if getattr(output_embeddings, "bias", None) is not None:
            output_embeddings.bias.data = nn.functional.pad(
                output_embeddings.bias.data,
                (
                    0,
                    output_embeddings.weight.shape[0] - output_embeddings.bias.shape[0],
                ),
                "constant",
                0,
            )
        if hasattr(output_embeddings, "out_features") and hasattr(input_embeddings, "num_embeddings"):
            output_embeddings.out_features = input_embeddings.num_embeddings

    def resize_token_embeddings(self, new_num_tokens):
        old_embeddings = self.get_input_embeddings()
        new_embeddings = nn.Embedding(new_num_tokens, old_embeddings.embedding_dim)
        n = min(old_embeddings.num_embeddings, new_num_tokens)
        with torch.no_grad():
            new_embeddings.weight[:n] = old_embeddings.weight[:n]
        self.wte = new_embeddings
        self.config.vocab_size = new_num_tokens
        self.tie_weights()
        return self.wte

    def forward(self, input_ids):
        return self.lm_head(torch.tanh(self.wte(input_ids)))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyLMHeadModel(TinyLMConfig())
    model.resize_token_embeddings(24)  # add special tokens, then fine-tune
    assert model.lm_head.weight is model.wte.weight
    assert model.lm_head.bias.shape == (24,) and model.lm_head.bias[20:].abs().sum() == 0

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = torch.randint(0, 24, (3, 5))
    before = model.lm_head.bias.detach().clone()
    logits = model(ids)
    loss = nn.functional.cross_entropy(logits.view(-1, 24), ids.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    assert model.lm_head.bias.grad.shape == (24,)
    assert not torch.equal(before, model.lm_head.bias)
    print("evidence holds: the bias was padded at build/resize time, weights stay tied and training updates the padded bias")
