# source: https://github.com/huggingface/transformers/blob/v4.30.0/src/transformers/models/bert/modeling_bert.py
# category: DL101
# expect: clean
# evidence: _init_weights runs before any forward: weights get the configured std, biases and the padding row are zero, LayerNorm is (1, 0), and a training step then updates every parameter
import torch
from torch import nn


class BertConfig(object):
    vocab_size = 50
    hidden_size = 16
    initializer_range = 0.02
    pad_token_id = 0
    layer_norm_eps = 1e-12


class BertPreTrainedModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def _init_weights(self, module):
        """Initialize the weights"""
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def post_init(self):
        self.apply(self._init_weights)


class BertForMaskedLMTiny(BertPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def forward(self, input_ids):
        hidden = self.LayerNorm(self.word_embeddings(input_ids))
        hidden = torch.tanh(self.dense(hidden))
        return self.decoder(hidden)


if __name__ == "__main__":
    torch.manual_seed(0)
    config = BertConfig()
    model = BertForMaskedLMTiny(config)
    assert abs(model.dense.weight.std().item() - 0.02) < 0.005
    assert model.dense.bias.abs().sum() == 0 and model.decoder.bias.abs().sum() == 0
    assert model.word_embeddings.weight[0].abs().sum() == 0
    assert torch.equal(model.LayerNorm.weight, torch.ones(16)) and model.LayerNorm.bias.abs().sum() == 0

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    input_ids = torch.randint(1, config.vocab_size, (4, 6))
    before = [p.detach().clone() for p in model.parameters()]
    loss = nn.CrossEntropyLoss()(model(input_ids).view(-1, config.vocab_size), input_ids.view(-1))
    loss.backward()
    optimizer.step()
    assert all(p.grad is not None for p in model.parameters())
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: initialisation through .data happened before use and training updates every parameter")
