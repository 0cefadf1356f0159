# source: https://github.com/facebookresearch/inversecooking/issues/3
# category: DL203
# expect: flag 32, 66
# evidence: in ingredients-only training the loss is built from sample()'s .data logits; backward raises "element 0 of tensors does not require grad"
import torch
import torch.nn as nn
import torch.nn.functional as F


class DecoderTransformer(nn.Module):
    """Ingredient decoder: greedy sampling over a small vocabulary, conditioned on image features."""

    def __init__(self, embed_size=16, vocab_size=10, max_seq_length=4):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, embed_size)
        self.cell = nn.GRUCell(embed_size, embed_size)
        self.linear = nn.Linear(embed_size, vocab_size)
        self.max_seq_length = max_seq_length

    def sample(self, img_features, greedy=True, first_token_value=0):
        bs = img_features.size(0)
        hidden = img_features
        token = torch.full((bs,), first_token_value, dtype=torch.long)
        sampled_ids, logits = [], []
        for i in range(self.max_seq_length):
            hidden = self.cell(self.embed_tokens(token), hidden)
            outputs = self.linear(hidden)
            logits.append(outputs)
            token = outputs.argmax(dim=-1) if greedy else torch.multinomial(outputs.softmax(-1), 1).squeeze(1)
            sampled_ids.append(token)
        sampled_ids = torch.stack(sampled_ids, 1)
        logits = torch.stack(logits, 1).data
        return sampled_ids, logits


class InverseCookingModel(nn.Module):
    def __init__(self, ingr_vocab_size=10, embed_size=16, ingrs_only=True):
        super().__init__()
        self.image_encoder = nn.Sequential(nn.Conv2d(3, embed_size, 3, padding=1), nn.AdaptiveAvgPool2d(1),
                                           nn.Flatten())
        self.ingredient_decoder = DecoderTransformer(embed_size, ingr_vocab_size)
        self.ingrs_only = ingrs_only
        self.crit_eos = nn.BCELoss(reduction='none')

    def forward(self, img_inputs, target_ingrs):
        losses = {}
        img_features = self.image_encoder(img_inputs)
        ingr_ids, ingr_logits = self.ingredient_decoder.sample(img_features, greedy=True, first_token_value=0)
        ingr_probs = F.softmax(ingr_logits, dim=-1)
        pooled_probs, _ = torch.max(ingr_probs, dim=1)
        target_one_hot = torch.zeros_like(pooled_probs).scatter_(1, target_ingrs, 1.0)
        losses['ingr_loss'] = F.binary_cross_entropy(pooled_probs.clamp(1e-6, 1 - 1e-6), target_one_hot)
        eos_pos = ingr_probs[:, :, 0]
        losses['eos_loss'] = self.crit_eos(eos_pos.clamp(1e-6, 1 - 1e-6), torch.zeros_like(eos_pos)).mean()
        return losses


def train_epoch(model, loader, optimizer, loss_weight=(0.0, 1000.0, 1.0)):
    model.train()
    for img_inputs, target_ingrs in loader:
        losses = model(img_inputs, target_ingrs)
        ingr_loss = losses['ingr_loss'].mean()
        eos_loss = losses['eos_loss'].mean()
        loss = loss_weight[1] * ingr_loss + loss_weight[2] * eos_loss
        model.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = InverseCookingModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = [(torch.randn(2, 3, 8, 8), torch.randint(0, 10, (2, 3)))]
    try:
        train_epoch(model, loader, optimizer)
    except RuntimeError as err:
        assert "element 0 of tensors does not require grad and does not have a grad_fn" in str(err)
    else:
        raise AssertionError("backward on a loss built from .data logits should raise")
    losses = model(*loader[0])
    assert all(v.grad_fn is None for v in losses.values())
    print("evidence holds: sample() returns logits.data, so the ingredient losses have no graph and backward raises")
