# source: https://github.com/kuprel/min-dalle/pull/24
# category: DL304
# expect: flag 9
# evidence: after the module-level torch.no_grad() grad mode is still on: the encoder state and sampled-token logits carry a grad_fn
import numpy
from typing import Dict
from torch import LongTensor, FloatTensor
import torch
torch.no_grad()

from torch import nn


class DalleBartEncoderTorch(nn.Module):
    def __init__(self, layer_count, embed_count, text_vocab_count, text_token_count, glu_embed_count):
        super().__init__()
        self.embed_tokens = nn.Embedding(text_vocab_count, embed_count)
        self.embed_positions = nn.Embedding(text_token_count, embed_count)
        self.layers = nn.ModuleList([
            nn.Sequential(nn.Linear(embed_count, glu_embed_count), nn.GELU(), nn.Linear(glu_embed_count, embed_count))
            for _ in range(layer_count)
        ])
        self.final_ln = nn.LayerNorm(embed_count)

    def forward(self, text_tokens: LongTensor) -> FloatTensor:
        pose_tokens = torch.arange(text_tokens.shape[1]).unsqueeze(0)
        encoder_state = self.embed_tokens(text_tokens) + self.embed_positions(pose_tokens)
        for layer in self.layers:
            encoder_state = encoder_state + layer(encoder_state)
        return self.final_ln(encoder_state)


class DalleBartDecoderTorch(nn.Module):
    def __init__(self, image_vocab_size, sample_token_count, embed_count, start_token):
        super().__init__()
        self.sample_token_count = sample_token_count
        self.start_token = start_token
        self.embed_tokens = nn.Embedding(image_vocab_size + 1, embed_count)
        self.cross = nn.Linear(embed_count, embed_count)
        self.lm_head = nn.Linear(embed_count, image_vocab_size)
        self.last_logits = []

    def decode_step(self, prev_token, encoder_state):
        decoder_state = self.embed_tokens(prev_token) + self.cross(encoder_state.mean(dim=1))
        return self.lm_head(torch.tanh(decoder_state))

    def forward(self, text_tokens: LongTensor, encoder_state: FloatTensor) -> LongTensor:
        image_tokens = torch.full((text_tokens.shape[0], 1), self.start_token, dtype=torch.long)
        self.last_logits = []
        for _ in range(self.sample_token_count):
            logits = self.decode_step(image_tokens[:, -1], encoder_state)
            self.last_logits.append(logits)
            probs = torch.softmax(logits, dim=-1)
            next_token = torch.multinomial(probs, 1)
            image_tokens = torch.cat([image_tokens, next_token], dim=1)
        return image_tokens[:, 1:]


def encode_torch(text_tokens: LongTensor, config: dict, params: Dict[str, dict]) -> FloatTensor:
    print("loading torch encoder")
    encoder = DalleBartEncoderTorch(
        layer_count=config['encoder_layers'],
        embed_count=config['d_model'],
        text_vocab_count=config['encoder_vocab_size'],
        text_token_count=config['max_text_length'],
        glu_embed_count=config['encoder_ffn_dim'],
    )
    encoder.load_state_dict(params.pop('encoder'), strict=False)
    print("encoding text tokens")
    encoder_state = encoder(text_tokens)
    del encoder
    return encoder_state


def decode_torch(text_tokens: LongTensor, encoder_state: FloatTensor, config: dict, seed: int,
                 params: Dict[str, dict], image_token_count: int):
    print("loading torch decoder")
    decoder = DalleBartDecoderTorch(
        image_vocab_size=config['image_vocab_size'],
        sample_token_count=image_token_count,
        embed_count=config['d_model'],
        start_token=config['decoder_start_token_id'],
    )
    decoder.load_state_dict(params.pop('decoder'), strict=False)
    print("sampling image tokens")
    torch.manual_seed(seed)
    image_tokens = decoder.forward(text_tokens, encoder_state)
    return image_tokens, decoder.last_logits


def generate_image_tokens_torch(text_tokens: numpy.ndarray, seed: int, config: dict, params: Dict[str, dict],
                                image_token_count: int):
    text_tokens = torch.tensor(text_tokens).to(torch.long)
    encoder_state = encode_torch(text_tokens, config, params)
    image_tokens, logits = decode_torch(text_tokens, encoder_state, config, seed, params, image_token_count)
    return encoder_state, image_tokens, logits


if __name__ == "__main__":
    torch.manual_seed(0)
    config = {
        'encoder_layers': 2, 'd_model': 16, 'encoder_vocab_size': 50, 'max_text_length': 8,
        'encoder_ffn_dim': 32, 'image_vocab_size': 20, 'decoder_start_token_id': 20,
    }
    params = {'encoder': {}, 'decoder': {}}
    text_tokens = numpy.random.RandomState(0).randint(0, 50, size=(2, 8))
    assert torch.is_grad_enabled(), "the bare torch.no_grad() at import time left grad mode on"
    encoder_state, image_tokens, logits = generate_image_tokens_torch(text_tokens, 0, config, params, 6)
    assert encoder_state.grad_fn is not None and encoder_state.requires_grad
    assert all(step.grad_fn is not None for step in logits)
    assert image_tokens.shape == (2, 6)
    print("evidence holds: grad mode stayed on; encoder state and all 6 decode steps keep an autograd graph")
